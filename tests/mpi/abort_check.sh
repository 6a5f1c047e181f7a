#!/bin/sh
# Runs the launcher command given and passes when it ends with a failure (the job aborted) before the
# timeout; a hang (124) or a clean exit fails. Open MPI does not always print its MPI_ABORT banner, so
# the exit status decides.
timeout 30 "$@"
rc=$?
echo "launcher exit status: $rc"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then echo "the job aborted"; exit 0; fi
exit 1
