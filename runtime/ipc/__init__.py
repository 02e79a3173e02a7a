"""Between processes: the app's harness process over a socket pair (frames, the remote
client and its server loop), the harness on its own thread with the coalescing event
channel, and `bastion attach`'s socket and follower.
"""
