#!/usr/bin/env bash
# Makes what the GPU machine needs for h200.sh (benchmarks/vllm/README.md), on a machine with PyPI access:
#   DEST/parts1 ... DEST/partsK   each <= PART_MAX_MIB (default 54, never over 60) MiB: the trimmed vLLM 0.22.0 as
#                                 vllm-trim.part-aa, -ab, ... (a tar.gz of its site-packages entries, split) and
#                                 the other wheels of README's table (nvidia-pytriton alone in its own dir)
#   DEST/vllm_backend/src         Triton's vLLM backend src/ at r26.01 (c70d654)
#
#   VLLM_BACKEND_GIT=/work/.mirror/triton-inference-server+vllm_backend/repo \
#     bash benchmarks/vllm/make_parts.sh [DEST]          # DEST defaults to .gpu
#
# VLLM_BACKEND_GIT: a git directory of triton-inference-server/vllm_backend (a clone's .git, a bare mirror, or the
# fetch tool's snapshot); without it the backend step is skipped (with a note) unless DEST/vllm_backend/src exists.
# VLLM_BACKEND_REF (default c70d654, r26.01's head): the commit taken.
# Downloads are cached in WHEEL_CACHE (default ~/.cache/tritonbuild-gpu-wheels, outside DEST so that DEST carries
# only what travels); a second run downloads nothing and rebuilds the parts from the cache.
# Each part dir is carried by one device call (carry: [.gpu/partsN], then `h200.sh .gpu/partsN`): a call carries
# the repository's tree (~8 MiB on 2026-12-07) too, within its 64 MiB.
set -euo pipefail
DEST=${1:-.gpu}
CACHE=${WHEEL_CACHE:-$HOME/.cache/tritonbuild-gpu-wheels}
PART_MAX_MIB=${PART_MAX_MIB:-54}
[ "$PART_MAX_MIB" -le 60 ] || { echo "PART_MAX_MIB must be <= 60" >&2; exit 2; }
BACKEND_REF=${VLLM_BACKEND_REF:-c70d654}
VLLM_WHEEL=vllm-0.22.0-cp38-abi3-manylinux_2_28_x86_64.whl
VLLM_SHA256=c387a977e35795e8f77b009e019e69722963819c26b55e4a679e09d4279ae35d
# README's table: what `import vllm`, the AsyncLLM engine, the Llama / compressed-tensors path, the Python stub
# (numpy 1) and the server and client need beyond the H200's image (torch 2.11, transformers 5.17, ...)
WHEELS="pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
typing_extensions==4.16.0 pyzmq==27.3.0 msgspec==0.23.0 cbor2==6.3.0 cachetools==8.0.2 pybase64==1.5.1 gguf==0.19.0
compressed-tensors==0.15.0.1 loguru==0.7.3 fastapi==0.165.0 starlette==1.10.0 opentelemetry-api==1.45.2
openai==2.54.0 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1 openai-harmony==0.0.8 llguidance==1.7.6 xgrammar==0.2.6
apache-tvm-ffi==0.1.10 humming-kernels==0.1.2 pyelftools==0.33 partial-json-parser==0.2.1.1.post7
numpy==1.26.4 scipy==1.14.1
nvidia-pytriton==0.7.0 tritonclient==2.73.0 python-rapidjson==1.25 geventhttpclient==2.6.1 gevent==26.9.0
greenlet==3.3.2 zope.event==6.2 zope.interface==8.7 brotli==1.2.1"
# Dropped from the vLLM wheel (README): FlashAttention 2 (the H200 runs FA3, vllm_flash_attn/_vllm_fa3_C stays),
# the MoE kernels (imported only if present), the Rust frontend binary, deep_gemm's builds for other Pythons
TRIM="vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/_moe_C.abi3.so vllm/vllm-rs
vllm/third_party/deep_gemm/_C.cpython-310-x86_64-linux-gnu.so vllm/third_party/deep_gemm/_C.cpython-311-x86_64-linux-gnu.so
vllm/third_party/deep_gemm/_C.cpython-313-x86_64-linux-gnu.so vllm/third_party/deep_gemm/_C.cpython-314-x86_64-linux-gnu.so"

mib() { echo $(( ($1 + 1048575) / 1048576 )); }
mkdir -p "$CACHE/got" "$DEST"

# 1. downloads (a marker per requirement names the file it gave: wheel file names normalize the project name).
# manylinux_2_35: llguidance 1.7.6 has only manylinux_2_31 wheels; the H200's Python 3.12.3 is Ubuntu 24.04's
# (glibc 2.39), where that wheel ran (README)
if [ ! -f "$CACHE/$VLLM_WHEEL" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: vllm==0.22.0 -d "$CACHE"
fi
echo "$VLLM_SHA256  $CACHE/$VLLM_WHEEL" | sha256sum -c --quiet - || { echo "vllm wheel sha256 differs" >&2; exit 3; }
for req in $WHEELS; do
  marker="$CACHE/got/$req"
  if [ -f "$marker" ] && [ -f "$CACHE/$(cat "$marker")" ]; then continue; fi
  before=$(ls "$CACHE")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform linux_x86_64 "$req" -d "$CACHE"
  new=$(comm -13 <(echo "$before") <(ls "$CACHE") | grep '\.whl$' || true)
  if [ -z "$new" ]; then  # already there before this run's marker: find it by its normalized name and version
    name=$(echo "${req%%==*}" | tr '[:upper:]-.' '[:lower:]__')
    new=$(cd "$CACHE" && ls | grep -i "^${name}-${req##*==}-.*\.whl$" | head -1)
  fi
  [ "$(echo "$new" | wc -l)" -eq 1 ] && [ -n "$new" ] || { echo "cannot tell the wheel of $req: $new" >&2; exit 3; }
  echo "$new" > "$marker"
done

# 2. the trimmed vLLM: the wheel's tree less TRIM, a reproducible tar.gz (sorted, fixed mtime and owner, gzip -n)
TGZ=$CACHE/vllm-trim.tar.gz
if [ ! -f "$TGZ" ] || [ "$TGZ" -ot "$0" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && python3 -m zipfile -e "$CACHE/$VLLM_WHEEL" .)
  for f in $TRIM; do
    [ -e "$tmp/$f" ] || { echo "not in the wheel any more: $f" >&2; exit 3; }
    rm -rf "${tmp:?}/$f"
  done
  [ -f "$tmp/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so" ] || { echo "FA3 missing" >&2; exit 3; }
  (cd "$tmp" && tar --sort=name --mtime=2026-01-01 --owner=0 --group=0 --numeric-owner -cf - vllm vllm-0.22.0.dist-info) \
    | gzip -n -6 > "$TGZ.tmp"
  mv "$TGZ.tmp" "$TGZ"
  rm -rf "$tmp"
  trap - EXIT
fi

# 3. the parts: the tar.gz split in SPLIT_MIB pieces, then first-fit decreasing of pieces and wheels into dirs of at
# most PART_MAX_MIB; nvidia-pytriton gets a dir of its own
SPLIT_MIB=$(( PART_MAX_MIB - 2 ))
rm -rf "$CACHE/split" "$DEST"/parts[0-9]* && mkdir -p "$CACHE/split"
(cd "$CACHE/split" && split -b "${SPLIT_MIB}M" -a 2 "$TGZ" vllm-trim.part-)
{
  for f in "$CACHE"/split/vllm-trim.part-*; do echo "$(stat -c %s "$f") $f"; done
  for req in $WHEELS; do f="$CACHE/$(cat "$CACHE/got/$req")"; echo "$(stat -c %s "$f") $f"; done
} | sort -k1,1nr -k2 > "$CACHE/items"
python3 - "$DEST" "$PART_MAX_MIB" "$CACHE/items" <<'PY'
import os, shutil, sys
dest, limit, items = sys.argv[1], int(sys.argv[2]) * 1048576, sys.argv[3]
bins: list[list] = []  # [used, [paths], alone]
for line in open(items):
    size, path = line.split(maxsplit=1)
    size, path = int(size), path.strip()
    assert size <= limit, f"{path} ({size} B) exceeds a part"
    alone = os.path.basename(path).startswith("nvidia_pytriton-")
    if alone:
        bins.append([size, [path], True])
        continue
    for b in bins:
        if not b[2] and b[0] + size <= limit:
            b[0] += size
            b[1].append(path)
            break
    else:
        bins.append([size, [path], False])
# the vLLM pieces first (in order), so that parts1.. carry them; the rest keep first-fit order
def order(b):
    pieces = sorted(os.path.basename(p) for p in b[1] if "vllm-trim.part-" in p)
    return (not pieces, pieces[0] if pieces else "", b[2])
bins.sort(key=order)
for n, (_, paths, _) in enumerate(bins, 1):
    d = os.path.join(dest, f"parts{n}")
    os.makedirs(d)
    for p in paths:
        try:
            os.link(p, os.path.join(d, os.path.basename(p)))
        except OSError:
            shutil.copyfile(p, os.path.join(d, os.path.basename(p)))
PY
rm -rf "$CACHE/split"

# 4. the vLLM backend's src/
if [ -n "${VLLM_BACKEND_GIT:-}" ]; then
  commit=$(git --git-dir="$VLLM_BACKEND_GIT" rev-parse --verify "$BACKEND_REF^{commit}")
  rm -rf "$DEST/vllm_backend" && mkdir -p "$DEST/vllm_backend"
  git --git-dir="$VLLM_BACKEND_GIT" archive "$commit" src | tar -x -C "$DEST/vllm_backend"
  echo "$commit" > "$DEST/vllm_backend/COMMIT"
  echo "vllm_backend src/ at $commit"
elif [ -d "$DEST/vllm_backend/src" ]; then
  echo "vllm_backend src/ kept ($(cat "$DEST/vllm_backend/COMMIT" 2>/dev/null || echo 'commit unknown'))"
else
  echo "NOTE: no VLLM_BACKEND_GIT: $DEST/vllm_backend/src not made (the fetch tool's github:triton-inference-server/vllm_backend gives the git dir)"
fi

# 5. report and check
status=0
for d in "$DEST"/parts[0-9]*; do
  bytes=$(du -cb "$d"/* | tail -1 | cut -f1)
  echo "$d $(mib "$bytes") MiB ($bytes B): $(cd "$d" && ls | tr '\n' ' ')"
  [ "$bytes" -le $(( PART_MAX_MIB * 1048576 )) ] || { echo "  over $PART_MAX_MIB MiB" >&2; status=1; }
done
echo "$(ls -d "$DEST"/parts[0-9]* | wc -l) part dirs; vllm-trim.tar.gz $(mib "$(stat -c %s "$TGZ")") MiB"
exit $status
