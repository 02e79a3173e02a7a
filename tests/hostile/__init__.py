"""Issue 34: nothing inside the sandbox reaches outside it.

A hostile-repository corpus, built by the tests themselves: each file here plants
what a stranger's clone or a sandboxed command could plant (git configuration,
sockets, start-up packages, control characters, files in a home folder) and shows
that bastion's own helpers do not obey it. Tests that need Landlock or a mount
namespace say so in one line where the kernel lacks them.
"""
