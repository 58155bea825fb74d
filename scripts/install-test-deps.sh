#!/usr/bin/env bash
# Installs, from Debian's packages, the programs the tests drive:
# - for the RDP end-to-end test (crates/deskbroker/tests/it/rdp.rs): xrdp
#   (two session hosts), freerdp2-x11 (xfreerdp, the client), xvfb (a
#   display for xfreerdp) and openssl (the test makes each xrdp a certificate
#   and key of its own);
# - for the desktop test (crates/deskbroker/tests/it/desktop.rs), a logon
#   through the browser's page to a real desktop: xorgxrdp (the X server
#   xrdp's session manager starts), twm and xfonts-base (a window manager
#   and its font), x11-xserver-utils (xsetroot), and the local user
#   deskbroker-web, its password locked (the test sets and locks its own);
#   for the browser's CredSSP test, a host that requires Network Level
#   Authentication: freerdp2-shadow-x11 (FreeRDP's shadow server) and
#   winpr-utils (winpr-hash, for its user's NTLM hash);
# - for the web console's browser test (tests/it/console.rs): chromium and
#   chromium-driver;
# - for the user portal's test (tests/it/portal.rs), which runs a real
#   OpenID Connect provider (the npm package oidc-provider) on Node: nodejs
#   and npm, when no `node` is found (the package asks for Node 20 or
#   later; an older Debian's nodejs may be too old: then install Node 20+
#   by hand);
# - for the smoke run of scripts/bench-http.sh
#   (crates/devbench/tests/it/http_script.rs): wrk;
# - for the PostgreSQL store's tests and the replicas' nemesis test
#   (tests/it/nemesis), when no initdb/pg_ctl is found (in
#   /usr/lib/postgresql/*/bin or on PATH): postgresql, Debian's server
#   package. scripts/test makes a throwaway cluster with its initdb unless
#   DESKBROKER_TEST_DATABASE_URL names a server; the nemesis always makes
#   a cluster of its own, since it stops and restarts it. (Debian's
#   package also creates and starts its own "main" cluster.)
# - for the Windows domain tests, which start a real Active Directory
#   domain controller (crates/deskbroker/tests/it/support/domain.rs):
#   samba, samba-dsdb-modules, samba-vfs-modules and samba-ad-provision
#   (the DC, its database and file-system modules, and the files
#   `samba-tool domain provision` needs),
#   iproute2 (`ip netns`: the DC runs in a network namespace of its own), ldap-utils (ldapsearch, which the tests query
#   the directory with), krb5-user (MIT kinit, kvno, klist: tickets
#   through the KDC and the KDC proxy), krb5-k5tls (MIT's TLS plugin, for
#   a `kdc = https://…/KdcProxy`), winbind (ntlm_auth and winbindd: a
#   domain member that checks NTLM sign-ins), libnss-wrapper (gives
#   Samba's tools run inside a DC's namespace the domain's users and hosts
#   without touching the system's name service) and socat (a relay, to
#   reach into a DC's namespace by hand when looking into one);
# - for the browser page's check (scripts/build-web --check, run by
#   scripts/test): rustup's wasm32-unknown-unknown target (added with
#   rustup when rustup is there; build-web installs wasm-bindgen-cli
#   itself, under target/) and npm (above);
# - for building at all (every mode, and alone with `--build`, which CI
#   runs before its first build): the RD Gateway's Windows sign-in links
#   MIT Kerberos' GSSAPI through the libgssapi crate, whose build reads
#   MIT's headers (libkrb5-dev, found with pkg-config) and generates its
#   bindings with bindgen (libclang-dev);
# - for the RD Gateway's Windows sign-in test (tests/it/windows_sign_in.rs):
#   curl (Debian's is built with GSSAPI: `--negotiate` makes the
#   client's SPNEGO token);
# - for the Debian package's check (scripts/package-check): lintian,
#   systemd-analyze (systemd), dpkg-shlibdeps (dpkg-dev, which cargo-deb
#   runs for the binary's library dependencies) and python3. With
#   `--package`, only these.
# Installs only what is missing, so it is quick on a machine that has them,
# and says what it installs. Debian/Ubuntu (apt-get); as root, or with sudo.
set -euo pipefail

only_package=false
only_build=false
case "${1:-}" in
  --package) only_package=true ;;
  --build) only_build=true ;;
  "") ;;
  *)
    echo "usage: $0 [--package | --build]" >&2
    exit 2
    ;;
esac

# Whether `program` is on PATH or in an sbin directory (where xrdp lives,
# often off a non-root user's PATH).
have() {
  command -v "$1" >/dev/null 2>&1 && return 0
  local dir
  for dir in /usr/sbin /sbin /usr/local/sbin; do
    [ -x "$dir/$1" ] && return 0
  done
  return 1
}

# Whether a PostgreSQL server's initdb and pg_ctl are here.
have_postgres_server() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && return 0
  done
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1
}

# The desktop test's local user, `deskbroker-web`, made with its password
# locked: the test sets a fresh random one for its run and locks it again,
# so the account never has a password anybody knows.
make_desktop_user() {
  id deskbroker-web >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "install-test-deps: need root or sudo to add the desktop test's user deskbroker-web" >&2
    return 1
  fi
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  echo "install-test-deps: adding the desktop test's user deskbroker-web (password locked)"
  "${sudo[@]}" useradd --create-home --shell /bin/sh deskbroker-web
  "${sudo[@]}" passwd --lock deskbroker-web >/dev/null
}

need=()
# Every build: MIT's GSSAPI headers and pkg-config file, and libclang for
# bindgen (the libgssapi-sys crate).
[ -e /usr/include/gssapi/gssapi.h ] || [ -e /usr/include/mit-krb5/gssapi/gssapi.h ] || need+=(libkrb5-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null || compgen -G '/usr/lib/*/libclang-[0-9]*.so*' >/dev/null || need+=(libclang-dev)
if $only_build; then
  if [ ${#need[@]} -eq 0 ]; then
    echo "install-test-deps: MIT's GSSAPI headers, pkg-config and libclang are installed"
    exit 0
  fi
fi
# The package check (scripts/package-check).
if ! $only_build; then
  command -v lintian >/dev/null 2>&1 || need+=(lintian)
  command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
  command -v dpkg-shlibdeps >/dev/null 2>&1 || need+=(dpkg-dev)
  command -v python3 >/dev/null 2>&1 || need+=(python3)
fi
if $only_build; then
  :
elif $only_package; then
  if [ ${#need[@]} -eq 0 ]; then
    echo "install-test-deps: lintian, systemd-analyze, dpkg-shlibdeps and python3 are installed"
    exit 0
  fi
else
  have xrdp || need+=(xrdp)
  have xfreerdp || need+=(freerdp2-x11)
  have Xvfb || need+=(xvfb)
  # The desktop test (tests/it/desktop.rs): xrdp's session manager starts
  # Xorg with xorgxrdp's modules and twm (its font from xfonts-base) for a
  # local test user, whose desktop xsetroot paints.
  [ -e /usr/lib/xorg/modules/libxorgxrdp.so ] || need+=(xorgxrdp)
  have twm || need+=(twm)
  [ -e /usr/share/fonts/X11/misc/fonts.dir ] || need+=(xfonts-base)
  have xsetroot || need+=(x11-xserver-utils)
  # The browser's CredSSP test: FreeRDP's shadow server is a host that
  # requires Network Level Authentication; winpr-hash writes its user.
  have freerdp-shadow-cli || need+=(freerdp2-shadow-x11)
  have winpr-hash || need+=(winpr-utils)
  # The console test runs /usr/bin/chromium under /usr/bin/chromedriver.
  [ -x /usr/bin/chromium ] || need+=(chromium)
  [ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
  # The portal test's OpenID provider runs on Node.
  command -v node >/dev/null 2>&1 || need+=(nodejs)
  command -v npm >/dev/null 2>&1 || need+=(npm)
  # The RDP test gives each xrdp a certificate of its own with `openssl req`.
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  # The smoke run of scripts/bench-http.sh loads the broker with wrk.
  command -v wrk >/dev/null 2>&1 || need+=(wrk)
  have xmllint || need+=(libxml2-utils) # the workspace feed's schema test (crates/api/tests/it/feed.rs)
  # Even with DESKBROKER_TEST_DATABASE_URL: the nemesis restarts a server of
  # its own.
  have_postgres_server || need+=(postgresql)
  # The Windows domain tests: a Samba AD domain controller in a network
  # namespace, and the clients that talk to it.
  have samba || need+=(samba)
  [ -d /usr/share/samba/setup/ad-schema ] || need+=(samba-ad-provision)
  # The DC's database and file-system modules (samba only recommends them;
  # provisioning sets the sysvol's ACLs through acl_xattr).
  compgen -G '/usr/lib/*/samba/ldb/samba_secrets.so' >/dev/null || need+=(samba-dsdb-modules)
  compgen -G '/usr/lib/*/samba/vfs/acl_xattr.so' >/dev/null || need+=(samba-vfs-modules)
  have ip || need+=(iproute2)
  have ldapsearch || need+=(ldap-utils)
  have kinit || need+=(krb5-user)
  compgen -G '/usr/lib/*/krb5/plugins/tls/k5tls.so' >/dev/null || need+=(krb5-k5tls)
  have ntlm_auth || need+=(winbind)
  compgen -G '/usr/lib/*/libnss_wrapper.so' >/dev/null || need+=(libnss-wrapper)
  have socat || need+=(socat)
  have curl || need+=(curl)
  # The browser page's WebAssembly (scripts/build-web --check).
  if command -v rustup >/dev/null 2>&1 &&
    ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    echo "install-test-deps: adding rustup's wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
  if [ ${#need[@]} -eq 0 ]; then
    echo "install-test-deps: xrdp, xorgxrdp, twm, xfreerdp, FreeRDP's shadow server, Xvfb, chromium, chromedriver, node, npm, a PostgreSQL server, Samba's domain controller, ldap-utils, MIT Kerberos' clients, winbind, nss_wrapper, socat, lintian, systemd-analyze, dpkg-shlibdeps and python3 are installed"
    make_desktop_user
    exit 0
  fi
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

echo "install-test-deps: installing ${need[*]} (Debian packages)"
export DEBIAN_FRONTEND=noninteractive
# Another apt (an unattended upgrade, say) may hold dpkg's lock: wait for it
# rather than fail.
apt_wait=(-o DPkg::Lock::Timeout=600)
"${sudo[@]}" apt-get "${apt_wait[@]}" update -q
"${sudo[@]}" apt-get "${apt_wait[@]}" install -y -q --no-install-recommends "${need[@]}"
$only_package || $only_build || make_desktop_user
