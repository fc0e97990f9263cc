#!/usr/bin/env bash
# Installs the Debian packages Earshot builds against: libsndfile, ALSA, FFTW (single
# precision), libsoxr, hiredis and zlib, with pkg-config; curl, which `earshot models fetch`
# downloads with (and its tests run); rsvg-convert, which `earshot plot -o x.png`
# uses; redis-server, which the worker tests and `earshot bench cluster` start on a free port;
# espeak-ng and sox, which make the training tests' data (tools/make_yes_no.sh); and flite and
# festival with three of its voices, which `earshot train-wake` speaks a phrase with besides espeak-ng.
# Uses sudo when not run as root.
set -euo pipefail
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
packages=(pkg-config libsndfile1-dev libasound2-dev libfftw3-dev libsoxr-dev libhiredis-dev zlib1g-dev curl ca-certificates librsvg2-bin redis-server espeak-ng sox
          flite festival festvox-kdlpc16k festvox-kallpc16k festvox-us-slt-hts)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
