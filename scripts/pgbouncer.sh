#!/usr/bin/env bash
# PgBouncer in transaction mode in front of the local PostgreSQL, as the README's "Sizing" section configures it:
# the configuration CI's second PostgreSQL run and bench/pooler.ts use.
#
#   scripts/pgbouncer.sh start [dir]   writes dir/pgbouncer.ini (default: a new temporary directory), starts PgBouncer
#                                      in the background and prints the directory (stop it with `stop dir`)
#   scripts/pgbouncer.sh stop dir      stops the PgBouncer started with that directory
#
# Environment: PGBOUNCER_PORT (6432), PGBOUNCER_POOL_SIZE (5: server connections per database and user, so clients
# really share them), PGBOUNCER_UPSTREAM_PORT (5432), PGBOUNCER_USER (postgres: PgBouncer refuses to run as root).
# Every database name is passed through to PostgreSQL (`*`), trust authentication. Named prepared statements are not
# supported in this mode: on 1.21+ `max_prepared_statements = 0` says so (1.18 has no such setting and passes them
# through unsupported, to whichever server connection the transaction gets).
set -euo pipefail

command=${1:-}
port=${PGBOUNCER_PORT:-6432}
pool_size=${PGBOUNCER_POOL_SIZE:-5}
upstream=${PGBOUNCER_UPSTREAM_PORT:-5432}
user=${PGBOUNCER_USER:-postgres}
binary=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)

case "$command" in
  start)
    dir=${2:-$(mktemp -d /tmp/pgbouncer.XXXXXX)}
    mkdir -p "$dir"
    version=$("$binary" --version | sed -n 's/^PgBouncer \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    read -r major minor <<<"$version"
    prepared=""
    if [ "$major" -gt 1 ] || [ "$minor" -ge 21 ]; then prepared="max_prepared_statements = 0"; fi
    printf '"%s" ""\n' "$user" >"$dir/userlist.txt"
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$upstream

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = $user
pool_mode = transaction
default_pool_size = $pool_size
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 2000
max_db_connections = 0
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
$prepared
EOF
    if [ "$(id -u)" = "0" ]; then chown -R "$user" "$dir"; as_user=(-u "$user"); else as_user=(); fi
    "$binary" -d "${as_user[@]}" "$dir/pgbouncer.ini"
    for _ in $(seq 1 50); do
      if pg_isready -h 127.0.0.1 -p "$port" -q 2>/dev/null; then
        echo "$dir"
        exit 0
      fi
      sleep 0.1
    done
    echo "pgbouncer did not start on port $port; see $dir/pgbouncer.log" >&2
    exit 1
    ;;
  stop)
    dir=${2:?usage: scripts/pgbouncer.sh stop dir}
    if [ -f "$dir/pgbouncer.pid" ]; then
      pid=$(cat "$dir/pgbouncer.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: scripts/pgbouncer.sh start [dir] | stop dir" >&2
    exit 2
    ;;
esac
