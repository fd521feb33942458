#!/usr/bin/env bash
# Build the HIP-over-CUDA shim into a ROCM_PATH-shaped folder (default tests/hipshim/build/rocm):
#   <out>/lib/libamdhip64.so   HIP runtime calls -> CUDA driver API (hipshim_hip.c)
#   <out>/lib/libhiprtc.so     hiprtc calls      -> NVRTC           (hipshim_hiprtc.c)
# Needs gcc, CUDA's headers ($CUDA_HOME/include, default /usr/local/cuda), a libcuda to link
# against (the toolkit's stub or the driver's libcuda.so.1) and libnvrtc (the toolkit's, else
# the nvidia-cuda-nvrtc wheel's). Override any of them with LIBCUDA=, LIBNVRTC=, NVRTC_INCLUDE=.
# Usage: tests/hipshim/build.sh [OUT_DIR]; prints OUT_DIR, for ROCM_PATH.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/build/rocm}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
python=${PYTHON:-python3}

fail() {
    echo "hipshim/build.sh: $*" >&2
    exit 1
}

first_file() {
    local candidate
    for candidate in "$@"; do
        if [[ -n "$candidate" && -f "$candidate" ]]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# The nvidia-cuda-nvrtc wheel's library, newest CUDA first (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib).
wheel_nvrtc() {
    "$python" - <<'EOF' 2>/dev/null || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
found = []
for root in nvidia.__path__:
    found += glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.*[0-9]"))
found = [f for f in found if "builtins" not in f and "alt" not in os.path.basename(f)]
print(sorted(found)[-1] if found else "")
EOF
}

[[ -f "$cuda_home/include/cuda.h" ]] || fail "no $cuda_home/include/cuda.h: set CUDA_HOME to a CUDA toolkit"

libcuda=${LIBCUDA:-$(first_file \
    "$cuda_home/lib64/stubs/libcuda.so" \
    "$cuda_home/targets/x86_64-linux/lib/stubs/libcuda.so" \
    "$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')" \
    /usr/local/nvidia/lib64/libcuda.so.1 \
    /usr/lib/x86_64-linux-gnu/libcuda.so.1 || true)}
[[ -n "$libcuda" && -f "$libcuda" ]] || fail "no libcuda found to link against; set LIBCUDA=/path/to/libcuda.so"

libnvrtc=${LIBNVRTC:-$(first_file \
    "$cuda_home/lib64/libnvrtc.so" \
    "$cuda_home/targets/x86_64-linux/lib/libnvrtc.so" \
    "$(wheel_nvrtc)" || true)}
[[ -n "$libnvrtc" && -f "$libnvrtc" ]] || fail "no libnvrtc found; set LIBNVRTC= or pip install nvidia-cuda-nvrtc"
libnvrtc=$(readlink -f "$libnvrtc")
nvrtc_dir=$(dirname "$libnvrtc")

nvrtc_include=${NVRTC_INCLUDE:-}
if [[ -z "$nvrtc_include" ]]; then
    for candidate in "$nvrtc_dir/../include" "$cuda_home/include"; do
        if [[ -f "$candidate/nvrtc.h" ]]; then
            nvrtc_include=$candidate
            break
        fi
    done
fi
[[ -n "$nvrtc_include" ]] || fail "no nvrtc.h next to $libnvrtc or in $cuda_home/include; set NVRTC_INCLUDE="

mkdir -p "$out/lib"
# Linking the full paths records their sonames (libcuda.so.1, libnvrtc.so.N); the rpath finds
# a wheel's NVRTC, which is on no loader path. -z defs: a misspelt CUDA call fails here.
flags=(-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden
    -I"$cuda_home/include" -Wl,-z,defs)
gcc "${flags[@]}" -Wl,-soname,libamdhip64.so -o "$out/lib/libamdhip64.so" \
    "$here/hipshim_hip.c" "$libcuda" -lpthread
gcc "${flags[@]}" -I"$nvrtc_include" -Wl,-soname,libhiprtc.so -Wl,-rpath,"$nvrtc_dir" \
    -o "$out/lib/libhiprtc.so" "$here/hipshim_hiprtc.c" "$libnvrtc" "$libcuda"

{
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "libcuda $libcuda"
    echo "libnvrtc $libnvrtc"
} >"$out/BUILD_INFO"
echo "$out"
