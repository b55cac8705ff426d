#!/bin/bash
# device_tree.sh stash [KEEP...] | restore | size: keeps what a device call carries under its 64 MiB.
# A device call copies the working tree (tracked files, and untracked ones git does not ignore) beside the
# carried .bundle (about 31 MB), 64 MiB in all. The committed results (bench/results/<date>/, cubes and logs)
# are past that on their own, and no device call reads them. So:
#   stash [KEEP...]  moves every entry of bench/results/ but README files and the KEEP names (entries of
#                    bench/results/, e.g. 2026-12-13) to the stash folder, and prints what would travel;
#   restore          moves them back (refusing to overwrite anything) and removes the stash folder;
#   size             prints what would travel: the tree's bytes and .bundle's.
# The stash folder is $CROSSBENCH_RESULTS_STASH, default ../.crossbench-results-stash beside the checkout
# (outside it, so git and the device call do not see it). Build and bundle before `stash`: the binaries
# record the tree's git state, and a stashed tree reads as modified. Commit after `restore`, never between.
set -euo pipefail
usage() { echo "usage: bench/device_tree.sh stash [KEEP...] | restore | size" >&2; exit 2; }
[ $# -ge 1 ] || usage
top=$(git rev-parse --show-toplevel)
cd "$top"
stash=${CROSSBENCH_RESULTS_STASH:-$top/../.crossbench-results-stash}
results=bench/results

size() {
  local tree bundle=0
  # A stashed tracked file is listed but absent: stat skips it (and says so on stderr, discarded).
  tree=$( { (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 -r stat -c %s -- 2>/dev/null ||
    true; } | awk '{s += $1} END {print s + 0}')
  [ -d .bundle ] && bundle=$(du -sb .bundle | cut -f1)
  echo "device_tree: the tree $((tree >> 20)) MiB + .bundle $((bundle >> 20)) MiB = $(((tree + bundle) >> 20)) MiB of 64 MiB"
  if [ $((tree + bundle)) -gt $((64 << 20)) ]; then
    echo "device_tree: over 64 MiB: a device call would refuse it (bench/device_tree.sh stash)" >&2
    return 1
  fi
}

case $1 in
  stash)
    shift
    if [ -d "$stash" ] && [ -n "$(ls -A "$stash")" ]; then
      echo "device_tree: $stash already holds a stash: bench/device_tree.sh restore first" >&2
      exit 1
    fi
    for keep in "$@"; do
      [ -e "$results/$keep" ] || { echo "device_tree: KEEP '$keep' is not an entry of $results/" >&2; exit 2; }
    done
    mkdir -p "$stash"
    moved=0
    for entry in "$results"/*; do
      name=$(basename "$entry")
      case $name in README*) continue ;; esac
      for keep in "$@"; do [ "$name" = "$keep" ] && continue 2; done
      mv -- "$entry" "$stash/"
      moved=$((moved + 1))
    done
    echo "device_tree: $moved entries of $results/ stashed in $stash"
    size ;;
  restore)
    [ $# -eq 1 ] || usage
    [ -d "$stash" ] || { echo "device_tree: no stash at $stash" >&2; exit 1; }
    for entry in "$stash"/* "$stash"/.[!.]*; do
      [ -e "$entry" ] || continue
      if [ -e "$results/$(basename "$entry")" ]; then
        echo "device_tree: $results/$(basename "$entry") exists: left in $stash, restore it by hand" >&2
        exit 1
      fi
    done
    restored=0
    for entry in "$stash"/* "$stash"/.[!.]*; do
      [ -e "$entry" ] || continue
      mv -- "$entry" "$results/"
      restored=$((restored + 1))
    done
    rmdir "$stash"
    echo "device_tree: $restored entries restored to $results/"
    if [ -n "$(git status --porcelain -- "$results" | grep '^ D' || true)" ]; then
      echo "device_tree: tracked results are still missing:" >&2
      git status --porcelain -- "$results" | grep '^ D' >&2
      exit 1
    fi ;;
  size)
    [ $# -eq 1 ] || usage
    size ;;
  *) usage ;;
esac
