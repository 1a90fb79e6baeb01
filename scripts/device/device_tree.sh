#!/usr/bin/env bash
# Keep the committed data out of a device call's copy of the working tree, and put it back.
#
# The device tool sends the tracked files, the untracked files git does not ignore and the carried paths, 64 MiB
# in all; the committed reports, traces and test fixtures alone are more than that (du of `git ls-files`:
# reports/ ~50 MB, tests/public-reports + tests/golden ~15 MB), and no device step reads them (the device
# scripts write everything under $OUT or /tmp). So before a device call:
#     bash scripts/device/device_tree.sh slim      # untracks (index only) and ignores them; the files stay on disk
# and right after it (also safe to run twice, or when nothing is slim):
#     bash scripts/device/device_tree.sh restore   # index back to HEAD for those paths, the ignore lines removed
#     bash scripts/device/device_tree.sh status    # slim or not, and the size the device would be sent
# While slim, `git status` shows the folders as deleted in the index: commit nothing but explicit paths
# (`git commit -- <paths>`), or restore first. The marker .git/whowaits-device-slim says which paths are slim.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PATHS=(reports tests/public-reports tests/golden)
GITDIR=$(git rev-parse --git-dir)
MARK="$GITDIR/whowaits-device-slim"
EXCLUDE="$GITDIR/info/exclude"
BEGIN="# >>> whowaits device_tree.sh slim"
END="# <<< whowaits device_tree.sh slim"

sent_bytes() {  # what the device tool would send: tracked + untracked-not-ignored (carry not included)
  { git ls-files -z; git ls-files -z -o --exclude-standard; } | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1
}

case "${1:-status}" in
  slim)
    [ -e "$MARK" ] && { echo "already slim ($(cat "$MARK")); run: bash scripts/device/device_tree.sh restore"; exit 0; }
    if ! git diff --quiet HEAD -- "${PATHS[@]}" || [ -n "$(git ls-files -o --exclude-standard -- "${PATHS[@]}")" ]; then
      echo "device_tree.sh: uncommitted changes under ${PATHS[*]}: commit them first (slim/restore resets those paths' index to HEAD)" >&2
      exit 1
    fi
    mkdir -p "$(dirname "$EXCLUDE")"
    { echo "$BEGIN"; for p in "${PATHS[@]}"; do echo "/$p/"; done; echo "$END"; } >> "$EXCLUDE"
    printf '%s\n' "${PATHS[@]}" > "$MARK"
    git rm -r -q --cached -- "${PATHS[@]}"
    echo "slim: ${PATHS[*]} untracked and ignored; the device is sent $(( $(sent_bytes) / 1048576 )) MiB + carry"
    ;;
  restore)
    if [ -e "$EXCLUDE" ]; then  # drop the block slim appended (gitignore has no trailing comments: a block)
      awk -v b="$BEGIN" -v e="$END" '$0 == b {skip = 1; next} $0 == e {skip = 0; next} !skip' "$EXCLUDE" > "$EXCLUDE.tmp"
      mv "$EXCLUDE.tmp" "$EXCLUDE"
    fi
    git reset -q HEAD -- "${PATHS[@]}"
    rm -f "$MARK"
    echo "restored: ${PATHS[*]} tracked again ($(( $(sent_bytes) / 1048576 )) MiB in the tree)"
    ;;
  status)
    if [ -e "$MARK" ]; then echo "slim ($(tr '\n' ' ' < "$MARK"))"; else echo "not slim"; fi
    echo "the device would be sent $(( $(sent_bytes) / 1048576 )) MiB + carry (limit 64 MiB)"
    ;;
  *) echo "usage: bash scripts/device/device_tree.sh slim|restore|status" >&2; exit 2 ;;
esac
