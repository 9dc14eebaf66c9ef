#!/usr/bin/env bash
# Install a minimal single-node SLURM (controller + compute daemon + clients)
# and munge from the Debian archive. Idempotent: exits 0 immediately when the
# SLURM client tools and daemons are already present.
#
# Used by CI and, when running as root, by tests/slurm_cluster.py.
set -euo pipefail
# the daemons live in /usr/sbin, which a non-login PATH may lack
export PATH="$PATH:/usr/sbin:/sbin"

have_all() {
    command -v sinfo >/dev/null 2>&1 &&
        command -v slurmctld >/dev/null 2>&1 &&
        command -v slurmd >/dev/null 2>&1 &&
        command -v munged >/dev/null 2>&1
}

if have_all; then
    echo "install-slurm: SLURM already installed ($(dpkg-query -W -f='${Version}' slurm-client 2>/dev/null || echo unknown))"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo -n"
    else
        echo "install-slurm: need root (or passwordless sudo) to install packages" >&2
        exit 1
    fi
else
    SUDO=""
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-slurm: apt-get not found; only Debian/Ubuntu are supported" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Bounded: a stuck mirror must not hang CI forever.
timeout -k 10 300 $SUDO apt-get update -qq
timeout -k 10 600 $SUDO apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge

if ! have_all; then
    echo "install-slurm: packages installed but sinfo/slurmctld/slurmd/munged still missing" >&2
    exit 1
fi
echo "install-slurm: installed slurm-client $(dpkg-query -W -f='${Version}' slurm-client)"
