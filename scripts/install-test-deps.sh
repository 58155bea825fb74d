#!/usr/bin/env bash
# Installs the programs the end-to-end tests drive: for the RDP test
# (crates/deskbroker/tests/it/rdp.rs) xrdp (two session hosts), xfreerdp
# (the client) and Xvfb (a display for xfreerdp); for the web console's
# browser test (tests/it/console.rs) Debian's chromium and its chromedriver.
# Installs only what is missing, so it is quick on a machine that has them.
# Debian/Ubuntu (apt-get); run as root or with sudo available.
set -euo pipefail

need=()
command -v xrdp >/dev/null 2>&1 || need+=(xrdp)
command -v xfreerdp >/dev/null 2>&1 || need+=(freerdp2-x11)
command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
# The console test runs /usr/bin/chromium under /usr/bin/chromedriver.
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
# xrdp's default TLS certificate is the snakeoil one from ssl-cert.
[ -e /etc/ssl/certs/ssl-cert-snakeoil.pem ] || need+=(ssl-cert)

if [ ${#need[@]} -eq 0 ]; then
  echo "install-test-deps: xrdp, xfreerdp, Xvfb, chromium and chromedriver are installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-test-deps: need root or sudo to install ${need[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: no apt-get; install ${need[*]} by hand" >&2
  exit 1
fi

echo "install-test-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${need[@]}"
# A fresh ssl-cert install makes the snakeoil pair; make sure it exists.
if [ ! -e /etc/ssl/certs/ssl-cert-snakeoil.pem ] && command -v make-ssl-cert >/dev/null 2>&1; then
  "${sudo[@]}" make-ssl-cert generate-default-snakeoil
fi
