# Source this file (bash or zsh): `source scripts/env.sh`.
# It puts the project's virtual environment and the built package (install/) on the paths, the way a
# sourced ROS 2 workspace would: PATH, PYTHONPATH, LD_LIBRARY_PATH, AMENT_PREFIX_PATH, and the RMW.
if [ -n "${BASH_SOURCE[0]:-}" ]; then
  _brainmem_here="${BASH_SOURCE[0]}"
else
  _brainmem_here="${(%):-%x}"
fi
BRAINMEM_ROOT="$(cd "$(dirname "$_brainmem_here")/.." && pwd)"
export BRAINMEM_ROOT
unset _brainmem_here

_brainmem_venv="$BRAINMEM_ROOT/.venv"
_brainmem_install="$BRAINMEM_ROOT/install"
_brainmem_py="$(ls -d "$_brainmem_venv"/lib/python3.* 2>/dev/null | head -n 1)"
_brainmem_py="${_brainmem_py##*/}"

export VIRTUAL_ENV="$_brainmem_venv"
export PATH="$_brainmem_install/bin:$_brainmem_venv/bin${PATH:+:$PATH}"
export PYTHONPATH="$_brainmem_install/lib/${_brainmem_py:-python3.11}/site-packages${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$_brainmem_install/lib:$_brainmem_venv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export AMENT_PREFIX_PATH="$_brainmem_install:$_brainmem_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$_brainmem_install:$_brainmem_venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# DDS discovery stays on this host unless the user chooses otherwise.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
# The embedding model ships inside a Python package; nothing is fetched from a hub at run time.
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
# `brainmem-ros` and `import brainmem_ros` outside the source folder run install/'s copy of the
# package, which is as old as the last build: say so when a source file is newer.
if [ -e "$_brainmem_install/.brainmem-build" ] && [ -n "$(find "$BRAINMEM_ROOT/brainmem_ros" \
    -name '*.py' -newer "$_brainmem_install/.brainmem-build" -print -quit 2>/dev/null)" ]; then
  echo "brainmem_ros: install/ is older than the sources; run 'make env' to rebuild it" >&2
fi
unset _brainmem_venv _brainmem_install _brainmem_py
