"""Robot models from URDF, spatial math, forward kinematics, Jacobians and IK (numpy only)."""
