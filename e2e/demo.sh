#!/usr/bin/env bash
# make demo: runs what exists of the system and says plainly what is not there yet.
set -uo pipefail
BUILD="${1:-build}"
echo "llmr demo"
echo "built binaries:"; ls "$BUILD/bin" 2>/dev/null | sed 's/^/  /' || echo "  (none)"
echo "built engines:";  ls "$BUILD/engines" 2>/dev/null | sed 's/^/  /' || echo "  (none)"
echo
echo "Not there yet: the router, the node and the gpt-oss engines are still being built;"
echo "this demo will start llmr-hub + router + node with a synthetic model and send a chat once they exist."
