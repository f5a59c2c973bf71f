"""Leader -> follower: a leader arm read by hand, its joints published as a follower's targets.

Modules: ``settings`` (the leader config's ``lead`` section), ``mapping`` (leader joints
to follower joints: names, scale, offset, gripper range), ``leader`` (the read ->
publish loop), ``session`` (leader and follower in one process, on the embedded broker).
"""
