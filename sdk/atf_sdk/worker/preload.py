"""What a worker host's fork server imports before it forks any executor (multiprocessing's forkserver preload).

The executor's modules (boto3, pydantic, the framework) are imported here once, and every executor forks from this
warmed process instead of importing them anew. Importing them makes no AWS client or session and starts no thread:
a thread or a lock held as the server forks would be lost, or held for ever, in the executor.

Nothing but the fork server imports this module (atf_sdk.worker.host names it), and the server ignores SIGTERM
and SIGINT, as executors do: the host decides when its executors stop, and a SIGTERM or Ctrl-C sent to the whole
process group (systemd's default, `kill -TERM -<pgid>`, a terminal) must not end the server. The host learns of
each executor's exit through the server that forked it, and would take the server's death for the death of them
all. The host starts the server with both ignored (host._start_fork_server), so one sent while the server's
interpreter starts already finds them ignored; from here on they are taken and dropped (absorb_stop_signals),
whoever started the server, so the executors it forks, and the processes their callbacks start, do not
inherit them ignored.
"""

import atf_sdk.worker.executor  # noqa: F401  (imported for the fork server's sake, see above)
from atf_sdk.worker.stop_signals import absorb_stop_signals

absorb_stop_signals()
