#!/usr/bin/env bash
# Builds Earshot's packages into dist/: a self-contained binary (the Swift standard library,
# Foundation and Dispatch linked statically; the C libraries it links are listed), then
#   dist/earshot_VERSION-1_ARCH.deb            for Debian 12 / Ubuntu (dpkg-deb; no debhelper)
#   dist/earshot-VERSION-linux-ARCH.tar.gz     the same files, and an INSTALL note
# Both hold /usr/bin/earshot, the bundled models and the catalog in /usr/share/earshot/models,
# the man page, bash/zsh/fish completions, the systemd units earshot-serve.service and
# earshot-worker@.service (packaging/), their options in /etc/default/earshot, and the copyright
# file. The .deb's Depends come from dpkg-shlibdeps on the binary.
# A release build already there is reused (swift build only redoes what changed).
# Installs dpkg-dev through apt when dpkg-shlibdeps is missing (sudo when not root).
# The maintainer is $EARSHOT_MAINTAINER, else the last commit's author.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if ! command -v dpkg-shlibdeps >/dev/null || ! command -v strip >/dev/null; then
  sudo=""; if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends dpkg-dev binutils
fi

# No $ORIGIN in the binary's search path: it loads the system's libraries only.
# Bound at load and read-only relocations (the hardening Debian's toolchain gives C programs).
build=(swift build -c release --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now -Xlinker -z -Xlinker relro --product earshot)
"${build[@]}"
bin="$("${build[@]}" --show-bin-path)/earshot"
version=$("$bin" --version | awk '{print $2}')
debversion="$version-1"
arch=$(dpkg --print-architecture)
maintainer=${EARSHOT_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || true)}
[ -n "$maintainer" ] || { echo "package.sh: set EARSHOT_MAINTAINER='Name <email>'" >&2; exit 64; }
# Every file's time is the last commit's, so that the same tree gives the same packages.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

echo "earshot $version: the C libraries it links (ldd):"
ldd "$bin" | awk '{print "  " $1 ($3 ? "  " $3 : "")}'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Staged where dpkg-shlibdeps expects a package's files: debian/PACKAGE.
tree="$work/debian/earshot"
mkdir -p "$tree"
install -D -m 755 "$bin" "$tree/usr/bin/earshot"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$tree/usr/bin/earshot"

# The bundled packages (each folder holding model.json), their licences, and the catalog.
models="$tree/usr/share/earshot/models"
mkdir -p "$models"
for dir in Models/*/; do
  name=$(basename "$dir")
  [ -f "$dir/model.json" ] || continue
  mkdir -p "$models/$name"
  for f in model.json weights.safetensors LICENSE; do
    [ -f "$dir/$f" ] && install -m 644 "$dir/$f" "$models/$name/$f"
  done
done
install -m 644 Models/catalog.json "$models/catalog.json"

# The manual page and completions, from the commands' declarations.
mkdir -p "$tree/usr/share/man/man1"
"$bin" man > "$work/earshot.1"
gzip -9n < "$work/earshot.1" > "$tree/usr/share/man/man1/earshot.1.gz"
install -d "$tree/usr/share/bash-completion/completions" "$tree/usr/share/zsh/vendor-completions" "$tree/usr/share/fish/vendor_completions.d"
"$bin" completions bash > "$tree/usr/share/bash-completion/completions/earshot"
"$bin" completions zsh > "$tree/usr/share/zsh/vendor-completions/_earshot"
"$bin" completions fish > "$tree/usr/share/fish/vendor_completions.d/earshot.fish"

# The services and their options.
install -D -m 644 packaging/earshot-serve.service "$tree/lib/systemd/system/earshot-serve.service"
install -D -m 644 "packaging/earshot-worker@.service" "$tree/lib/systemd/system/earshot-worker@.service"
install -D -m 644 packaging/hardening.conf "$tree/lib/systemd/system/earshot-.service.d/hardening.conf"
install -D -m 644 packaging/default "$tree/etc/default/earshot"

# Documentation: copyright, the changes (upstream's and the package's).
doc="$tree/usr/share/doc/earshot"
install -D -m 644 packaging/copyright "$doc/copyright"
gzip -9n < CHANGELOG.md > "$doc/changelog.gz"
date=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
printf 'earshot (%s) unstable; urgency=medium\n\n  * Earshot %s, packaged by scripts/package.sh.\n  * Its changes: /usr/share/doc/earshot/changelog.gz.\n\n -- %s  %s\n' \
  "$debversion" "$version" "$maintainer" "$date" | gzip -9n > "$doc/changelog.Debian.gz"
install -D -m 644 packaging/lintian-overrides "$tree/usr/share/lintian/overrides/earshot"
find "$tree" -type d -exec chmod 755 {} +
find "$tree/usr/share" "$tree/lib" "$tree/etc" -type f -exec chmod 644 {} +

# The run-time dependencies: dpkg-shlibdeps on the binary.
mkdir -p "$tree/DEBIAN"
printf 'Source: earshot\n\nPackage: earshot\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/earshot/usr/bin/earshot | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
packages=$(echo "$depends" | tr ',' '\n' | sed 's/(.*)//; s/ //g' | grep -v '^libc6$' | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')

# The tarball: the same tree and a note, before the .deb's control files are added.
mkdir -p dist
top="earshot-$version-linux-$arch"
cp -a "$tree" "$work/$top"
rm -r "$work/$top/DEBIAN"
sed -e "s/@VERSION@/$version/g" -e "s/@ARCH@/$arch/g" -e "s/@PACKAGES@/$packages/" packaging/INSTALL > "$work/$top/INSTALL"
chmod 644 "$work/$top/INSTALL"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -C "$work" -czf "dist/$top.tar.gz" "$top"

# The .deb: control, conffiles, maintainer scripts, md5sums.
mkdir -p "$tree/DEBIAN"
size=$(du -sk --apparent-size "$tree" | cut -f1)
cat > "$tree/DEBIAN/control" <<CONTROL
Package: earshot
Version: $debversion
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Recommends: curl
Section: sound
Priority: optional
Description: stateful audio models: voice activity, wake words, sound events
 Earshot labels audio files (voice activity with Silero VAD, wake words with
 microWakeWord's models), listens live on ALSA capture devices, and serves Home
 Assistant's voice satellites over the Wyoming protocol (earshot-serve.service).
 Workers on Redis Streams (earshot-worker@.service) label many sources, their
 state checkpointed. Models from ONNX and TFLite import into its own package
 format; earshot models fetch installs published ones by name (with curl).
CONTROL
echo /etc/default/earshot > "$tree/DEBIAN/conffiles"
install -m 755 packaging/postinst packaging/prerm packaging/postrm "$tree/DEBIAN/"
(cd "$tree" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort | xargs md5sum > DEBIAN/md5sums)
chmod 644 "$tree/DEBIAN/control" "$tree/DEBIAN/conffiles" "$tree/DEBIAN/md5sums"
deb="dist/earshot_${debversion}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$tree" "$deb" >/dev/null

echo "Depends: $depends"
ls -l "$deb" "dist/$top.tar.gz" | awk '{print $5 "  " $9}'
