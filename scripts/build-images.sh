#!/usr/bin/env bash
# Builds the images bosun's tests and examples use, with no registry at all:
#
#   bosun.local/busybox:1.35  Debian's busybox-static as /bin/busybox plus a
#                             symlink per applet; CMD ["sh"]
#   bosun.local/web:1, :2     busybox serving /usr/share/nginx/html (as nginx
#                             does; /www links there) with index.html saying
#                             "web v1" / "web v2"; its `httpd` stops at once on
#                             SIGTERM, as nginx does, also as a pod's PID 1
#   bosun.local/in-cluster-client:1
#                             only with --in-cluster-client: the agent's
#                             example `in_cluster_client` (a kube-rs
#                             Client::try_default() that lists its namespace's
#                             pods), built with cargo, stripped, with the
#                             shared libraries ldd lists and nothing else;
#                             rebuilt whenever the binary changes
#   bosun.local/aggregated-server:1
#                             only with --aggregated-server: the agent's
#                             example `aggregated_server` (an extension API
#                             server for an APIService), built the same way
#   bosun.local/webhook-server:1
#                             only with --webhook-server: the agent's example
#                             `webhook_server` (an admission webhook over
#                             TLS), made the same way
#
# Each is a `docker import` of a root filesystem made here, labelled with
# IMAGE_VERSION. Images that exist with that label are kept unless --force is
# given; older builds are replaced. Honours DOCKER_HOST like docker itself.
# (The pause image is not built here: the agent carries it and imports it.)
set -euo pipefail

force=0
in_cluster=0
aggregated=0
webhook_server=0
for arg in "$@"; do
  case "$arg" in
    --force|-f) force=1 ;;
    --in-cluster-client) in_cluster=1 ;;
    --aggregated-server) aggregated=1 ;;
    --webhook-server) webhook_server=1 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "build-images.sh: unknown argument $arg (only --force, --in-cluster-client, --aggregated-server, --webhook-server)" >&2
       exit 2 ;;
  esac
done

BUSYBOX_IMAGE=bosun.local/busybox:1.35
# Bump when what an image holds changes, so machines with an older build
# (CI reuses the engine) rebuild it.
IMAGE_VERSION=2

# Test binaries run side by side and may all find the images missing: one
# builds, the others wait for it and then find the images there.
exec 9>"${TMPDIR:-/tmp}/bosun-build-images.lock"
flock 9

have_image() {
  [ "$force" = 0 ] || return 1
  local version
  version=$(docker image inspect -f '{{index .Config.Labels "io.bosun.image-version"}}' "$1" \
    2>/dev/null) || return 1
  [ "$version" = "$IMAGE_VERSION" ]
}

busybox_bin() {
  if [ ! -x /bin/busybox ] || ! /bin/busybox --list >/dev/null 2>&1 \
     || ! file_is_static /bin/busybox; then
    echo "build-images.sh: installing Debian's busybox-static" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq busybox-static >/dev/null 2>&1 || {
      apt-get update -qq >/dev/null
      apt-get install -y -qq busybox-static >/dev/null
    }
  fi
  echo /bin/busybox
}

# A dynamically linked busybox (Debian's `busybox` package) would not run in
# an image without a libc.
file_is_static() {
  ! grep -q 'ld-linux' <(head -c 4096 "$1" | tr -d '\0' 2>/dev/null) 2>/dev/null
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# make_rootfs DIR: a busybox root filesystem in DIR.
make_rootfs() {
  local root=$1 bb applet
  bb=$(busybox_bin)
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,proc,sys,dev,var/run,home}
  chmod 1777 "$root/tmp"
  cp "$bb" "$root/bin/busybox"
  # One symlink per applet, where busybox itself would install it.
  while read -r applet; do
    [ "$applet" = bin/busybox ] && continue
    mkdir -p "$root/$(dirname "$applet")"
    ln -sf /bin/busybox "$root/$applet"
  done < <("$root/bin/busybox" --list-full)
  # Never without the ones tests rely on, wherever --list-full put them.
  for applet in sh sleep cat touch rm ls ps hostname nslookup wget httpd nc echo env \
                id mkdir test true false kill date; do
    [ -e "$root/bin/$applet" ] || [ -e "$root/usr/bin/$applet" ] \
      || [ -e "$root/sbin/$applet" ] || [ -e "$root/usr/sbin/$applet" ] \
      || ln -s /bin/busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' \
    >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

# import DIR IMAGE CHANGE...: `docker import` of DIR as IMAGE.
import() {
  local root=$1 image=$2
  shift 2
  local changes=(--change "LABEL io.bosun.image-version=$IMAGE_VERSION")
  for c in "$@"; do changes+=(--change "$c"); done
  tar -C "$root" --numeric-owner --owner=0 --group=0 -cf - . \
    | docker import "${changes[@]}" - "$image" >/dev/null
  echo "built $image"
}

if ! have_image "$BUSYBOX_IMAGE"; then
  make_rootfs "$tmp/busybox"
  import "$tmp/busybox" "$BUSYBOX_IMAGE" 'CMD ["sh"]'
fi

for v in 1 2; do
  image=bosun.local/web:$v
  have_image "$image" && continue
  [ -d "$tmp/busybox" ] || make_rootfs "$tmp/busybox"
  rm -rf "$tmp/web"
  cp -a "$tmp/busybox" "$tmp/web"
  mkdir -p "$tmp/web/usr/share/nginx/html"
  echo "web v$v" >"$tmp/web/usr/share/nginx/html/index.html"
  ln -s /usr/share/nginx/html "$tmp/web/www"
  # busybox httpd ignores SIGTERM as PID 1, so a pod would wait out its grace
  # period; nginx stops at once. Every `httpd` on the PATH is this wrapper.
  for applet in bin/httpd sbin/httpd usr/bin/httpd usr/sbin/httpd; do
    [ -e "$tmp/web/$applet" ] || [ -L "$tmp/web/$applet" ] || continue
    rm -f "$tmp/web/$applet"
    cat >"$tmp/web/$applet" <<'WRAPPER'
#!/bin/sh
/bin/busybox httpd "$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null; wait $child; exit 0' TERM INT
wait $child
WRAPPER
    chmod 755 "$tmp/web/$applet"
  done
  import "$tmp/web" "$image" \
    'CMD ["httpd", "-f", "-p", "80", "-h", "/usr/share/nginx/html"]' 'EXPOSE 80'
done

# example_image EXAMPLE IMAGE NAME: the agent's example binary EXAMPLE as
# /bin/NAME, its entrypoint, with the shared libraries it loads and nothing
# else; rebuilt whenever the binary changes.
example_image() {
  local example=$1 image=$2 name=$3
  local repo target bin sum have root
  repo=$(cd "$(dirname "$0")/.." && pwd)
  target=${CARGO_TARGET_DIR:-$repo/target}
  # --workspace, not -p bosun-agent: the features are then the ones
  # `cargo test --workspace` resolved, so a test calling this reuses its
  # artifacts instead of rebuilding half the dependencies (minutes).
  (cd "$repo" && "${CARGO:-cargo}" build -q --workspace --example "$example")
  bin=$target/debug/examples/$example
  sum=$(sha256sum "$bin" | cut -d' ' -f1)
  have=$(docker image inspect -f '{{index .Config.Labels "io.bosun.binary-sha256"}}' "$image" \
    2>/dev/null || true)
  if [ "$force" = 1 ] || [ "$have" != "$sum" ]; then
    root=$tmp/$name
    mkdir -p "$root/bin" "$root/etc" "$root/tmp"
    strip -o "$root/bin/$name" "$bin"
    # Every library the dynamic linker loads, at the path it loads it from.
    while read -r lib; do
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done < <(ldd "$bin" | grep -o '/[^ ]*' | sort -u)
    printf 'root:x:0:0:root:/:/bin/%s\n' "$name" >"$root/etc/passwd"
    import "$root" "$image" "LABEL io.bosun.binary-sha256=$sum" \
      "ENTRYPOINT [\"/bin/$name\"]"
  fi
}

if [ "$in_cluster" = 1 ]; then
  example_image in_cluster_client bosun.local/in-cluster-client:1 in-cluster-client
fi
if [ "$aggregated" = 1 ]; then
  example_image aggregated_server bosun.local/aggregated-server:1 aggregated-server
fi
if [ "$webhook_server" = 1 ]; then
  example_image webhook_server bosun.local/webhook-server:1 webhook-server
fi
