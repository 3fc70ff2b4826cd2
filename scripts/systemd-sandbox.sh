#!/usr/bin/env bash
# A real systemd for tests, booted as PID 1 of a pid, mount, cgroup and UTS
# namespace of its own, in a root made of this host's /usr (read-only), a
# few files of /etc and fresh tmpfs for everything else. The host's service
# manager (if any), its /etc, /tmp, /var and /run are never touched: systemd
# at boot cleans /tmp and /var/tmp, reads every enabled unit of /etc and
# applies sysctls, none of which may reach the host. The network is the
# host's (what the sandbox's services listen on is reachable from outside).
#
#   systemd-sandbox.sh start DIR [PATH...]
#       DIR: an empty directory of the caller's, for the sandbox's state.
#       Each PATH (a host directory or file) is shown at the same path
#       inside, writable. A directory is shared both ways: what is mounted
#       below it inside (an agent's tmpfs volumes) is mounted on the host
#       too, where Docker looks for it. Prints systemd's pid once
#       `systemctl is-system-running` says running or degraded.
#   systemd-sandbox.sh exec DIR COMMAND [ARG...]
#       Runs COMMAND inside (its mounts, its pids, its systemd).
#   systemd-sandbox.sh stop DIR
#       Kills the sandbox's PID 1 (and with it every process inside),
#       removes the cgroups `start` made and unmounts the host side of the
#       shared directories (and whatever is still mounted below them);
#       DIR stays for the caller to remove.
#
# Needs root, unshare and nsenter (util-linux), systemd's binaries in /usr
# (Debian's systemd package; nothing of it needs to be running), and a
# private / on the host (as in containers and CI; a systemd host's shared
# / would carry the sandbox's mounts out).
set -euo pipefail

usage() { sed -n '2,22p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2
shift 2
[ -d "$dir" ] || { echo "systemd-sandbox.sh: $dir is not a directory" >&2; exit 2; }
dir=$(cd "$dir" && pwd)

# The units the sandbox must not start: device management, kernel settings,
# mounts of the host's kernel file systems, clean-ups of shared folders,
# logins and consoles.
MASKED="systemd-udevd.service systemd-udev-trigger.service systemd-udevd-kernel.socket
systemd-udevd-control.socket systemd-udev-settle.service systemd-modules-load.service
systemd-sysctl.service systemd-networkd.service systemd-networkd.socket
systemd-resolved.service systemd-timesyncd.service systemd-logind.service getty.target
console-getty.service systemd-firstboot.service systemd-hwdb-update.service
systemd-remount-fs.service systemd-binfmt.service proc-sys-fs-binfmt_misc.automount
sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount
sys-fs-fuse-connections.mount dev-hugepages.mount dev-mqueue.mount tmp.mount
systemd-random-seed.service systemd-pstore.service systemd-machine-id-commit.service
systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service
systemd-tmpfiles-clean.timer systemd-tmpfiles-clean.service e2scrub_reap.service
systemd-update-utmp.service systemd-update-utmp-runlevel.service ldconfig.service
systemd-journal-catalog-update.service systemd-boot-system-token.service
apt-daily.timer apt-daily-upgrade.timer man-db.timer dpkg-db-backup.timer
fstrim.timer e2scrub_all.timer logrotate.timer swap.target modprobe@.service"

CONTROLLERS="systemd pids memory cpu cpuacct blkio devices freezer cpuset"

cgroup_v2() { [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; }

# Runs inside the new namespaces: builds the root, pivots into it, boots.
if [ "$cmd" = __boot ]; then
  root=$dir/root
  mount -t tmpfs -o mode=755 sandbox-root "$root"
  mkdir -p "$root"/{usr,etc,var/tmp,var/log/journal,var/lib,tmp,run,proc,sys,dev,root,.oldroot}
  chmod 1777 "$root/tmp" "$root/var/tmp"
  chmod 700 "$root/root"
  mount --bind /usr "$root/usr"
  mount -o remount,bind,ro "$root/usr"
  for l in bin sbin lib lib64; do [ -e "/usr/$l" ] && ln -s "usr/$l" "$root/$l"; done
  for f in passwd group shadow gshadow nsswitch.conf hosts resolv.conf ld.so.cache \
    host.conf protocols services; do
    [ -e "/etc/$f" ] && cp -L "/etc/$f" "$root/etc/$f"
  done
  ln -s ../usr/lib/os-release "$root/etc/os-release"
  : >"$root/etc/machine-id"
  mkdir -p "$root/etc/systemd/system"
  for u in $MASKED; do ln -s /dev/null "$root/etc/systemd/system/$u"; done
  ln -s /usr/lib/systemd/system/multi-user.target "$root/etc/systemd/system/default.target"
  echo bosun-sandbox >"$root/etc/hostname"
  # systemd mounts a tmpfs on /run unless one is there: this one carries
  # what is bound below it (a Docker socket).
  mount -t tmpfs -o mode=755 run "$root/run"
  ln -s ../run "$root/var/run"
  mount --rbind /dev "$root/dev"
  mount --rbind /sys "$root/sys"
  mount -t tmpfs -o mode=755 cgroup "$root/sys/fs/cgroup"
  if cgroup_v2; then
    mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
  else
    for c in $CONTROLLERS; do
      mkdir -p "$root/sys/fs/cgroup/$c"
      if [ "$c" = systemd ]; then
        mount -t cgroup -o none,name=systemd cgroup "$root/sys/fs/cgroup/$c"
      else
        mount -t cgroup -o "$c" cgroup "$root/sys/fs/cgroup/$c"
      fi
    done
  fi
  mount -t proc proc "$root/proc"
  while IFS= read -r p; do
    [ -n "$p" ] || continue
    if [ -d "$p" ]; then mkdir -p "$root$p"; else mkdir -p "$(dirname "$root$p")"; : >"$root$p"; fi
    mount --bind "$p" "$root$p"
  done <"$dir/binds"
  hostname bosun-sandbox
  cd "$root"
  pivot_root . .oldroot
  umount -l /.oldroot
  rmdir /.oldroot
  export container=bosun-sandbox
  exec /lib/systemd/systemd --unit=multi-user.target </dev/null
fi

case "$cmd" in
  start)
    [ "$(id -u)" = 0 ] || { echo "systemd-sandbox.sh: needs root" >&2; exit 1; }
    [ -x /lib/systemd/systemd ] || { echo "systemd-sandbox.sh: no /lib/systemd/systemd" >&2; exit 1; }
    [ "$(findmnt -no PROPAGATION /)" = private ] || {
      echo "systemd-sandbox.sh: / is not a private mount here; the sandbox's mounts would reach the host" >&2
      exit 1
    }
    mkdir -p "$dir/root"
    : >"$dir/binds"
    : >"$dir/shared"
    for p in "$@"; do
      [ -e "$p" ] || { echo "systemd-sandbox.sh: $p does not exist" >&2; exit 2; }
      p=$(realpath "$p")
      echo "$p" >>"$dir/binds"
      if [ -d "$p" ]; then
        # A mount of its own in a peer group: the sandbox's copy stays in it.
        mount --bind "$p" "$p"
        echo "$p" >>"$dir/shared"
        mount --make-shared "$p"
      fi
    done
    # A cgroup of its own, which becomes the sandbox's cgroup root.
    cg=bosun-sandbox-$$
    echo "$cg" >"$dir/cgroup"
    if cgroup_v2; then
      mkdir "/sys/fs/cgroup/$cg"
    else
      for c in $CONTROLLERS; do mkdir "/sys/fs/cgroup/$c/$cg"; done
      cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$cg/cpuset.cpus"
      cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$cg/cpuset.mems"
    fi
    (
      if cgroup_v2; then
        echo "$BASHPID" >"/sys/fs/cgroup/$cg/cgroup.procs"
      else
        for c in $CONTROLLERS; do echo "$BASHPID" >"/sys/fs/cgroup/$c/$cg/cgroup.procs"; done
      fi
      exec unshare --pid --fork --mount --cgroup --uts --propagation unchanged \
        "$0" __boot "$dir" >"$dir/boot.log" 2>&1 </dev/null
    ) &
    echo $! >"$dir/unshare.pid"
    # systemd is the unshare process's one child.
    for _ in $(seq 1 300); do
      pid=$(cat "/proc/$(cat "$dir/unshare.pid")/task/"*/children 2>/dev/null | head -n1 | tr -d ' ')
      [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] && break
      pid=
      sleep 0.1
    done
    [ -n "$pid" ] || { echo "systemd-sandbox.sh: systemd did not start:" >&2; cat "$dir/boot.log" >&2; "$0" stop "$dir"; exit 1; }
    echo "$pid" >"$dir/systemd.pid"
    # Booting takes about a second; a loaded machine may take much longer.
    deadline=$((SECONDS + 120))
    while [ $SECONDS -lt $deadline ]; do
      state=$(nsenter -t "$pid" -m -p -u systemctl is-system-running 2>/dev/null || true)
      case "$state" in
        running|degraded) echo "$pid"; exit 0 ;;
      esac
      sleep 0.2
    done
    echo "systemd-sandbox.sh: systemd did not finish booting (state: $state)" >&2
    nsenter -t "$pid" -m -p -u systemctl --failed --no-pager >&2 || true
    "$0" stop "$dir"
    exit 1
    ;;
  exec)
    [ $# -ge 1 ] || usage
    pid=$(cat "$dir/systemd.pid")
    exec nsenter -t "$pid" -m -p -u --wd=/ "$@"
    ;;
  stop)
    if [ -f "$dir/systemd.pid" ]; then
      pid=$(cat "$dir/systemd.pid")
      # Killing a pid namespace's init kills every process in it.
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd ] && kill -9 "$pid" 2>/dev/null || true
    fi
    if [ -f "$dir/unshare.pid" ]; then
      u=$(cat "$dir/unshare.pid")
      for _ in $(seq 1 100); do kill -0 "$u" 2>/dev/null || break; sleep 0.1; done
    fi
    if [ -f "$dir/cgroup" ]; then
      cg=$(cat "$dir/cgroup")
      if cgroup_v2; then roots="/sys/fs/cgroup/$cg"; else
        roots=; for c in $CONTROLLERS; do roots="$roots /sys/fs/cgroup/$c/$cg"; done
      fi
      for r in $roots; do
        [ -d "$r" ] || continue
        # Emptied as the processes go; removed deepest first.
        for _ in $(seq 1 50); do
          find "$r" -depth -type d -exec rmdir {} + 2>/dev/null || true
          [ -d "$r" ] || break
          sleep 0.1
        done
        [ -d "$r" ] && echo "systemd-sandbox.sh: could not remove $r" >&2
      done
      rm -f "$dir/cgroup"
    fi
    if [ -f "$dir/shared" ]; then
      while IFS= read -r p; do
        [ -n "$p" ] && umount -R "$p" 2>/dev/null || true
      done <"$dir/shared"
      rm -f "$dir/shared"
    fi
    rm -f "$dir/systemd.pid" "$dir/unshare.pid"
    rmdir "$dir/root" 2>/dev/null || true
    ;;
  *) usage ;;
esac
