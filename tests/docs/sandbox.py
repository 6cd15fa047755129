"""Run a command in a network namespace of its own, with only a loopback interface, brought up.

The documents name the local stack's ports as they are (4566, 8080, 8081); in a namespace of its own
each document's session has them to itself, whatever else runs on this machine. Started as
`unshare --net --map-root-user python -m tests.docs.sandbox COMMAND...` (a user namespace, so no
privilege is needed where the kernel allows unprivileged ones).
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH14x"


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        asked = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(probe, _SIOCGIFFLAGS, asked))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


if __name__ == "__main__":
    loopback_up()
    os.execvp(sys.argv[1], sys.argv[1:])
