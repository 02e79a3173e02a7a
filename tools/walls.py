"""The sandbox's walls: what a command must neither see nor reach, besides writing
outside its writable roots (``tools/sandbox.py`` ``plan`` adds them to the
supervisor's spec; ``tools/landlock.py`` applies them in the command's mount
namespace).

- **Bastion's own folders** (``SandboxPolicy.private``: the store with its
  sockets and artifacts, the config dir with the trust file, the attach
  sockets' fallback folders; the runtime names them, since only it knows where
  it keeps them) are covered with an empty read-only tmpfs, whatever the
  workspace. The file tools refuse them too (``Guard``).
- **Sockets that act for the user**: the folders that hold them by convention
  (``$XDG_RUNTIME_DIR`` whole, tmux's, screen's, X11's) are hidden; the socket
  files the environment names (``$SSH_AUTH_SOCK``, the D-Bus session bus,
  ``$DOCKER_HOST``) and the well-known system ones (docker, containerd, podman,
  the D-Bus system bus, systemd) are covered with an empty file, which refuses
  ``connect``; and, beyond any list, the supervisor covers every listening
  pathname socket ``/proc/net/unix`` shows when the command starts
  (``sockets:N``). Abstract sockets are scoped by Landlock (ABI 6), or left
  behind by the command's own network namespace when the network is off.
- **The user's start-up files** when a writable root holds them (bastion opened
  in ``$HOME``): shell and session start-up files, the folders on the user's
  PATH, ``~/.ssh`` and git's configuration are bound read-only; one that does
  not exist cannot be created, because the folder that would hold it is sealed
  (no new entries; what is in it stays writable); every folder between the
  writable root and each of them is pinned, so none can be renamed aside and
  planted anew. The file tools refuse writing them (``Guard``).

Imported by the workspace (for ``Guard``) and by ``plan``: standard library only,
and light.
"""

from __future__ import annotations

import os
import stat

# The user's start-up files, relative to $HOME, and why each is guarded.
SHELL = "a shell start-up file: it runs in the user's next shell"
SESSION = "a session start-up file: it runs when the user logs in"
ON_PATH = "a folder on the user's PATH: what is planted there runs in place of real commands"
START_UP = {
    **dict.fromkeys(
        (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
         ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc",
         ".tcshrc", ".login", ".logout", ".config/fish"),
        SHELL,
    ),
    **dict.fromkeys(
        (".xprofile", ".xsessionrc", ".xinitrc", ".xsession", ".pam_environment",
         ".config/autostart", ".config/environment.d", ".config/systemd"),
        SESSION,
    ),
    **dict.fromkeys(("bin", ".local/bin"), ON_PATH),
    ".ssh": "the user's SSH keys and configuration",
    ".gitconfig": "the user's git configuration: it runs code in every repository",
    ".config/git": "the user's git configuration: it runs code in every repository",
}  # fmt: skip
PRIVATE = "bastion's own (its store, configuration, trust file or sockets)"
SEALED = (
    "commands cannot create entries directly in {dir}: it holds the user's start-up "
    "files, which bastion guards in a workspace that contains them"
)
SEALED_HINT = "work in a project folder rather than in the home folder itself"
MAX_SOCKETS = 1024  # listening sockets covered from /proc/net/unix; a note past it

# Sockets that act for the user, by convention or well known (the environment's are
# added by ``socket_files``).
SYSTEM_SOCKETS = (
    "/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
    "/run/podman/podman.sock", "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket", "/run/systemd/private", "/run/snapd.socket",
)  # fmt: skip


class Walls:
    """The spec entries of the walls for one command, and why each path is walled
    (for the denials a command's result explains). (A plain class: the workspace
    imports this module, and one-shot tool runs stay lean.)"""

    __slots__ = ("hidden", "notes", "pinned", "read_only", "reasons", "sealed", "sockets")

    def __init__(self) -> None:
        self.hidden: list[str] = []  # hd: folders (tmpfs)
        self.sockets: list[str] = []  # hs: socket files
        self.read_only: list[str] = []  # ro:
        self.sealed: list[str] = []  # seal:
        self.pinned: list[str] = []  # pin:
        self.reasons: dict[str, str] = {}  # path -> why it is walled
        self.notes: list[str] = []

    def entries(self) -> list[str]:
        return [
            *(f"pin:{p}" for p in self.pinned),
            *(f"seal:{p}" for p in self.sealed),
            *(f"ro:{p}" for p in self.read_only),
            *(f"hs:{p}" for p in self.sockets),
            *(f"hd:{p}" for p in self.hidden),
            f"sockets:{MAX_SOCKETS}",
        ]


def beneath(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def home() -> str:
    return os.path.realpath(os.path.expanduser("~"))


def socket_dirs() -> list[str]:
    """The folders that hold the user's sockets by convention."""
    import tempfile  # (the workspace imports this module; a plan only needs this)

    uid = os.getuid()
    env = os.environ
    found = [
        env.get("XDG_RUNTIME_DIR", ""),
        f"/run/user/{uid}",
        f"/tmp/tmux-{uid}",
        os.path.join(env.get("TMUX_TMPDIR", ""), f"tmux-{uid}") if env.get("TMUX_TMPDIR") else "",
        "/tmp/.X11-unix",
        "/tmp/.ICE-unix",
        "/run/screen",
        "/var/run/screen",
        env.get("SCREENDIR", ""),
        os.path.join(home(), ".screen"),
        # the tools' own spill folder when the host gives none (tools/output.py)
        os.path.join(tempfile.gettempdir(), f"bastion-artifacts-{uid}"),
    ]
    return [p for p in found if p]


def socket_files() -> list[str]:
    """The socket files the environment names, and the well-known system ones."""
    env = os.environ
    found = [env.get("SSH_AUTH_SOCK", "")]
    for key, scheme in (("DBUS_SESSION_BUS_ADDRESS", "unix:path="), ("DOCKER_HOST", "unix://")):
        value = env.get(key, "")
        for part in value.split(";"):
            if part.startswith(scheme):
                found.append(part[len(scheme) :].split(",")[0])
    return [p for p in (*found, *SYSTEM_SOCKETS) if p.startswith("/")]


def is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def build(root: str, writable: list[str], private: tuple[str, ...]) -> Walls:
    """The walls for a command in workspace ``root`` with writable roots ``writable``
    (real paths, the workspace's among them) and bastion's folders ``private``."""
    walls = Walls()
    keep = [os.path.realpath(root), *writable]
    for path in [*private, *socket_dirs()]:
        hide_folder(walls, os.path.realpath(path), keep, path in private)
    for path in socket_files():
        real = os.path.realpath(path)
        if is_socket(real) and not any(beneath(real, h) for h in walls.hidden):
            walls.sockets.append(real)
            walls.reasons[real] = "a socket that acts for the user"
    mine = home()
    for rel, why in START_UP.items():
        guard(walls, os.path.join(mine, rel), why, writable, hide=False)
    for path in private:
        guard(walls, os.path.realpath(path), PRIVATE, writable, hide=True)
    walls.sealed.sort(key=len)  # a folder before the folders in it
    taken = {*walls.sealed, *walls.read_only, *walls.hidden}
    walls.pinned = [p for p in dict.fromkeys(walls.pinned) if p not in taken]
    return walls


def hide_folder(walls: Walls, real: str, keep: list[str], private: bool) -> None:
    """Hide folder ``real`` unless it holds the workspace or a writable root (said in
    a note for bastion's own)."""
    if not os.path.isdir(real) or real in walls.hidden:
        return
    if any(beneath(k, real) for k in keep):
        if private:
            walls.notes.append(
                f"{real} (bastion's own) holds the workspace or a writable folder, so it "
                "is not hidden from commands"
            )
        return
    walls.hidden.append(real)
    walls.reasons[real] = PRIVATE if private else "a folder of sockets that act for the user"


def guard(walls: Walls, target: str, why: str, writable: list[str], hide: bool) -> None:
    """Keep ``target`` out of a command's reach where a writable root holds it: an
    existing one read-only (or hidden), a missing one impossible to create (its
    nearest existing folder sealed), the folders on the way pinned."""
    real = os.path.realpath(target)
    if os.path.islink(target):  # (a dotfiles link: the link must stay where it is too)
        link_folder = os.path.realpath(os.path.dirname(target))
        if any(beneath(link_folder, w) for w in writable):
            seal(walls, link_folder, writable)
    tops = [w for w in writable if beneath(real, w) and real != w]
    if not tops:
        return
    if os.path.lexists(real):
        if hide and os.path.isdir(real):
            if real not in walls.hidden:
                walls.hidden.append(real)
        elif real not in walls.read_only:
            walls.read_only.append(real)
        walls.reasons[real] = why
        anchor = os.path.dirname(real)
    else:
        anchor = os.path.dirname(real)
        while not os.path.isdir(anchor) and anchor != "/":
            anchor = os.path.dirname(anchor)
        if not any(beneath(anchor, w) for w in writable):
            return  # (created nowhere a command may write)
        seal(walls, anchor, writable)
    pin_between(walls, anchor, tops)


def seal(walls: Walls, folder: str, writable: list[str]) -> None:
    """No new entries in ``folder`` (and none renamed or removed), and it stays put."""
    if folder not in walls.sealed:
        walls.sealed.append(folder)
    walls.reasons.setdefault(folder, SEALED.format(dir=folder))
    pin_between(walls, os.path.dirname(folder), [w for w in writable if beneath(folder, w)])


def pin_between(walls: Walls, anchor: str, tops: list[str]) -> None:
    """Pin ``anchor`` and every folder above it up to (not including) each of ``tops``."""
    for top in tops:
        folder = anchor
        while beneath(folder, top) and folder != top:
            walls.pinned.append(folder)
            folder = os.path.dirname(folder)


def why_walled(path: str, walls: Walls) -> str:
    """Why the walls refuse writing ``path`` ('' if they do not)."""
    for walled, why in walls.reasons.items():
        if walled in walls.sealed:
            if os.path.dirname(path) == walled and not os.path.lexists(path):
                return why
        elif beneath(path, walled):
            return f"protected: {walled} is {why}"
    return ""


# -- the file tools ---------------------------------------------------------------


class Guard:
    """What the file tools never touch in a workspace that holds bastion's own
    folders (read or written) or the user's start-up files (written): paths as
    workspace-relative parts, compared case-insensitively (a case-insensitive
    volume would let ``.BASHRC`` through otherwise)."""

    __slots__ = ("private", "start_up")

    def __init__(self, private: dict[tuple[str, ...], str], start_up: dict[tuple[str, ...], str]):
        self.private, self.start_up = private, start_up

    @classmethod
    def of(cls, root: str, private: tuple[str, ...]) -> Guard | None:
        """The guard of workspace ``root``; None when it holds nothing guarded."""
        real = os.path.realpath(root)
        mine = home()

        def inside(paths: dict[str, str]) -> dict[tuple[str, ...], str]:
            found = {}
            for path, why in paths.items():
                target = os.path.realpath(path)
                if beneath(target, real) and target != real:
                    rel = os.path.relpath(target, real)
                    found[tuple(p.casefold() for p in rel.split("/"))] = why
            return found

        guarded = inside(dict.fromkeys(private, PRIVATE))
        start_up = inside({os.path.join(mine, rel): why for rel, why in START_UP.items()})
        return cls(guarded, start_up) if guarded or start_up else None

    def why(self, parts: tuple[str, ...], write: bool) -> str | None:
        """Why the tools refuse ``parts`` (None if they do not)."""
        folded = tuple(p.casefold() for p in parts)
        for table in (self.private, self.start_up) if write else (self.private,):
            for guarded, why in table.items():
                if folded[: len(guarded)] == guarded:
                    return why
        return None

    def refuse(self, parts: tuple[str, ...], shown: str, write: bool) -> None:
        """Raise the FORBIDDEN refusal for ``parts`` if the tools never touch it."""
        why = self.why(parts, write)
        if why is None:
            return
        from tools.refusal import RefusalCode, Refused

        if why == PRIVATE:
            raise Refused(
                RefusalCode.FORBIDDEN,
                f"'{shown}' is {why}; tools never open it",
                "leave it alone: only the user changes bastion's settings, with bastion itself",
            )
        raise Refused(
            RefusalCode.FORBIDDEN,
            f"'{shown}' is {why}; tools never write it in a workspace that holds it",
            "tell the user the change you would make there; "
            "and work in a project folder rather than in the home folder itself",
        )

    def hides(self, path: str) -> bool:
        """Whether a listing or search leaves workspace-relative ``path`` out."""
        return self.why(tuple(p for p in path.split("/") if p), write=False) is not None
