#!/usr/bin/env bash
# Build the package into install/ with colcon against the pip-installed ROS 2 wheels in .venv.
# On a machine with ROS 2 installed, use plain `colcon build` after sourcing ROS instead (README).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
export CMAKE_PREFIX_PATH="$venv" AMENT_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH"
# Kept as one colcon invocation so a second run with nothing changed is a fast no-op.
exec colcon --log-base log build \
  --merge-install --symlink-install \
  --build-base build --install-base install \
  --event-handlers console_direct- \
  --cmake-args -DPython3_EXECUTABLE="$venv/bin/python" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release
