"""Inverse-kinematics solvers behind one interface."""
