#!/usr/bin/env bash
# run.sh: what `make run` runs. Starts MinIO (bin/minio) on loopback and
# sweepgate (bin/sweepgate, with embedded etcd) in front of it, waits until
# both are ready, prints how to use the endpoint, and stops both cleanly on
# Ctrl-C (SIGINT) or SIGTERM.
#
# Settings (environment, all optional):
#
#   SWEEPGATE_RUN_DATA          state directory (default: <repo>/.data); MinIO data in
#                               $SWEEPGATE_RUN_DATA/minio, etcd in $SWEEPGATE_RUN_DATA/etcd,
#                               logs in $SWEEPGATE_RUN_DATA/logs
#   SWEEPGATE_RUN_MINIO_PORT    MinIO S3 port on 127.0.0.1 (default 9100)
#   SWEEPGATE_RUN_CONSOLE_PORT  MinIO console port on 127.0.0.1 (default 9101)
#   SWEEPGATE_RUN_ACCESS_KEY    MinIO root user; clients use it as their access key
#                               (default sweepgate)
#   SWEEPGATE_RUN_SECRET_KEY    MinIO root password; clients use it as their secret key
#                               (default sweepgate-secret)
#   SWEEPGATE_LISTEN            sweepgate S3 listener (default 127.0.0.1:9000)
#   SWEEPGATE_ADMIN_LISTEN      sweepgate admin listener: status page, admin API,
#                               /metrics /healthz /readyz (default 127.0.0.1:9001);
#                               its token is generated in $SWEEPGATE_RUN_DATA/etcd/admin-token
#                               unless SWEEPGATE_ADMIN_TOKEN or SWEEPGATE_ADMIN_TOKEN_FILE sets one
#   SWEEPGATE_ETCD_EMBEDDED_CLIENT_URL, SWEEPGATE_ETCD_EMBEDDED_PEER_URL
#                               embedded etcd's URLs (default http://127.0.0.1:2379
#                               and :2380; port 0 picks a free port)
#   SWEEPGATE_RUN_MINIO_BIN     MinIO binary (default <repo>/bin/minio)
#   SWEEPGATE_RUN_BIN           sweepgate binary (default <repo>/bin/sweepgate)
#   SWEEPGATE_RUN_READY_TIMEOUT seconds to wait for each server (default 60)
#
# Any other SWEEPGATE_* variable is read by sweepgate itself (see
# `bin/sweepgate serve --help` and docs/configuration.md).
set -euo pipefail

if ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
	echo "run: error: bash 5.1 or newer is needed (this is $BASH_VERSION)" >&2
	exit 1
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

data=${SWEEPGATE_RUN_DATA:-$root/.data}
minio_bin=${SWEEPGATE_RUN_MINIO_BIN:-$root/bin/minio}
sweepgate_bin=${SWEEPGATE_RUN_BIN:-$root/bin/sweepgate}
host=127.0.0.1
minio_port=${SWEEPGATE_RUN_MINIO_PORT:-9100}
console_port=${SWEEPGATE_RUN_CONSOLE_PORT:-9101}
access_key=${SWEEPGATE_RUN_ACCESS_KEY:-sweepgate}
secret_key=${SWEEPGATE_RUN_SECRET_KEY:-sweepgate-secret}
listen=${SWEEPGATE_LISTEN:-127.0.0.1:9000}
admin_listen=${SWEEPGATE_ADMIN_LISTEN:-127.0.0.1:9001}
etcd_client_url=${SWEEPGATE_ETCD_EMBEDDED_CLIENT_URL:-http://127.0.0.1:2379}
etcd_peer_url=${SWEEPGATE_ETCD_EMBEDDED_PEER_URL:-http://127.0.0.1:2380}
ready_timeout=${SWEEPGATE_RUN_READY_TIMEOUT:-60}
region=us-east-1

# The SWEEPGATE_RUN_* settings are this script's own, not sweepgate's: keep
# them out of its environment.
for name in "${!SWEEPGATE_RUN_@}"; do
	unset "$name"
done

minio_url="http://$host:$minio_port"
# A listener given as ":9000" or "0.0.0.0:9000" is reached on loopback.
connect_host() {
	local addr=$1 h=${1%:*}
	case "$h" in "" | 0.0.0.0 | "[::]") h=127.0.0.1 ;; esac
	printf '%s:%s' "$h" "${addr##*:}"
}
endpoint="http://$(connect_host "$listen")"
admin_url="http://$(connect_host "$admin_listen")"

say() { printf 'run: %s\n' "$*" >&2; }
die() {
	printf 'run: error: %s\n' "$*" >&2
	exit 1
}

# ---- preflight ------------------------------------------------------------

[[ -x $minio_bin ]] || die "MinIO binary $minio_bin is missing; run 'make run' (it builds bin/minio once, about four minutes)"
[[ -x $sweepgate_bin ]] || die "sweepgate binary $sweepgate_bin is missing; run 'make build' first"
command -v curl >/dev/null || die "curl is needed to check readiness; install it (Debian: apt-get install curl)"

# port_in_use HOST PORT: true when something accepts connections there.
port_in_use() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

check_port() { # check_port WHAT SETTING HOST:PORT
	local what=$1 setting=$2 hp=$3 h p
	h=${hp%:*}
	p=${hp##*:}
	[[ $p == 0 ]] && return 0
	case "$h" in "" | 0.0.0.0 | "[::]") h=127.0.0.1 ;; esac
	h=${h#[}
	h=${h%]}
	if port_in_use "$h" "$p"; then
		die "$what port $p on $h is already in use (another 'make run'?). Stop whatever holds it, or set $setting to use another port"
	fi
}
# holds_port PID PORT: true when process PID has a listening TCP socket on
# PORT (read from /proc; true where there is no /proc/net/tcp to read).
holds_port() {
	local pid=$1 want target fd inode local_addr st
	local -a inodes=()
	[[ -r /proc/net/tcp ]] || return 0
	printf -v want ':%04X' "$2"
	while read -r _ local_addr _ st _ _ _ _ _ inode _; do
		[[ $st == 0A && $local_addr == *"$want" ]] && inodes+=("$inode")
	done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
	for fd in /proc/"$pid"/fd/*; do
		target=$(readlink "$fd" 2>/dev/null) || continue
		for inode in "${inodes[@]}"; do
			[[ $target == "socket:[$inode]" ]] && return 0
		done
	done
	return 1
}

# check_owner NAME PID SETTING HOST:PORT: dies unless the server just
# started holds its port, so that what answered its readiness check was
# this server and not another process that took the port meanwhile.
check_owner() {
	local name=$1 pid=$2 setting=$3 p=${4##*:}
	[[ $p == 0 ]] && return 0
	holds_port "$pid" "$p" ||
		die "$name (pid $pid) does not hold port $p: another process took it. Stop whatever holds it, or set $setting to use another port"
}

url_hostport() { # http://h:p/ -> h:p
	local u=${1#*://}
	printf '%s' "${u%%/*}"
}

check_port "MinIO S3" SWEEPGATE_RUN_MINIO_PORT "$host:$minio_port"
check_port "MinIO console" SWEEPGATE_RUN_CONSOLE_PORT "$host:$console_port"
check_port "sweepgate S3" SWEEPGATE_LISTEN "$listen"
check_port "sweepgate admin" SWEEPGATE_ADMIN_LISTEN "$admin_listen"
check_port "embedded etcd client" SWEEPGATE_ETCD_EMBEDDED_CLIENT_URL "$(url_hostport "$etcd_client_url")"
check_port "embedded etcd peer" SWEEPGATE_ETCD_EMBEDDED_PEER_URL "$(url_hostport "$etcd_peer_url")"

mkdir -p "$data/minio" "$data/etcd" "$data/logs"
chmod 700 "$data/etcd" # etcd warns about wider permissions
data=$(cd "$data" && pwd) # absolute: it goes into sweepgate's config file
minio_log=$data/logs/minio.log
sweepgate_log=$data/logs/sweepgate.log

# ---- process management -----------------------------------------------------

minio_pid=""
sweepgate_pid=""
stopping=0

# stop_pid NAME PID: SIGTERM, wait up to 20s, then SIGKILL. Always reaps.
stop_pid() {
	local name=$1 pid=$2 i
	[[ -n $pid ]] || return 0
	if kill -0 "$pid" 2>/dev/null; then
		say "stopping $name (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "$name did not stop within 20s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	wait "$pid" 2>/dev/null || true
}

stop_all() {
	((stopping)) && return 0
	stopping=1
	# sweepgate first: it drains client requests that still need MinIO.
	stop_pid sweepgate "$sweepgate_pid"
	stop_pid minio "$minio_pid"
	sweepgate_pid=""
	minio_pid=""
}

on_signal() {
	trap '' INT TERM
	say "signal received"
	stop_all
	say "stopped"
	exit 0
}
trap on_signal INT TERM
trap 'stop_all' EXIT

show_log() { # show_log NAME FILE
	printf -- '--- last lines of %s (%s) ---\n' "$1" "$2" >&2
	tail -n 40 "$2" >&2 || true
	printf -- '---\n' >&2
}

# wait_ready NAME PID URL LOG: poll URL until it answers 200.
wait_ready() {
	local name=$1 pid=$2 url=$3 log=$4 deadline
	deadline=$((SECONDS + ready_timeout))
	until curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null && rc=0 || rc=$?
			show_log "$name" "$log"
			die "$name exited (status $rc) before it was ready; its log is $log"
		fi
		if ((SECONDS >= deadline)); then
			show_log "$name" "$log"
			die "$name not ready at $url after ${ready_timeout}s; its log is $log"
		fi
		sleep 0.2
	done
}

# ---- MinIO ------------------------------------------------------------------

say "starting MinIO on $minio_url (data $data/minio, log $minio_log)"
MINIO_ROOT_USER=$access_key \
	MINIO_ROOT_PASSWORD=$secret_key \
	MINIO_BROWSER_REDIRECT=off \
	MINIO_UPDATE=off \
	"$minio_bin" server --quiet \
	--address "$host:$minio_port" \
	--console-address "$host:$console_port" \
	"$data/minio" >>"$minio_log" 2>&1 &
minio_pid=$!
wait_ready MinIO "$minio_pid" "$minio_url/minio/health/live" "$minio_log"
check_owner MinIO "$minio_pid" SWEEPGATE_RUN_MINIO_PORT "$host:$minio_port"
say "MinIO ready (pid $minio_pid)"

# ---- sweepgate ----------------------------------------------------------------

# The settings go in a generated config file rather than flags, so that any
# SWEEPGATE_* variable the user sets still overrides them (precedence is
# flags, then environment, then the file).
config=$data/sweepgate.yaml
yaml_str() { # a YAML single-quoted scalar: nothing is special in it but '
	local q="'"
	printf "'%s'" "${1//$q/$q$q}"
}
umask_old=$(umask)
umask 077
cat >"$config" <<EOF
# Generated by scripts/run.sh on every start; edits are overwritten.
listen: $(yaml_str "$listen")
region: $(yaml_str "$region")
backend:
  endpoint: $(yaml_str "$minio_url")
  region: $(yaml_str "$region")
  access_key: $(yaml_str "$access_key")
  secret_key: $(yaml_str "$secret_key")
accept_backend_credentials: true
etcd:
  embedded:
    data_dir: $(yaml_str "$data/etcd")
    client_url: $(yaml_str "$etcd_client_url")
    peer_url: $(yaml_str "$etcd_peer_url")
admin:
  listen: $(yaml_str "$admin_listen")
# One local gateway has no load balancer to drain from: Ctrl-C stops it now.
shutdown:
  drain_delay: 0s
EOF
umask "$umask_old"

say "starting sweepgate on $endpoint (admin $admin_url, config $config, etcd data $data/etcd, log $sweepgate_log)"
"$sweepgate_bin" serve --config "$config" >>"$sweepgate_log" 2>&1 &
sweepgate_pid=$!
wait_ready sweepgate "$sweepgate_pid" "$admin_url/readyz" "$sweepgate_log"
check_owner "sweepgate S3" "$sweepgate_pid" SWEEPGATE_LISTEN "$listen"
check_owner "sweepgate admin" "$sweepgate_pid" SWEEPGATE_ADMIN_LISTEN "$admin_listen"
check_owner "embedded etcd client" "$sweepgate_pid" SWEEPGATE_ETCD_EMBEDDED_CLIENT_URL "$(url_hostport "$etcd_client_url")"
check_owner "embedded etcd peer" "$sweepgate_pid" SWEEPGATE_ETCD_EMBEDDED_PEER_URL "$(url_hostport "$etcd_peer_url")"
say "sweepgate ready (pid $sweepgate_pid)"

# ---- admin token -----------------------------------------------------------------
# Without SWEEPGATE_ADMIN_TOKEN or SWEEPGATE_ADMIN_TOKEN_FILE, sweepgate
# generates the admin API's token at its first start and keeps it in its
# etcd data directory; the commands find it through the same configuration.
if [[ -n ${SWEEPGATE_ADMIN_TOKEN:-} ]]; then
	token_where='from $SWEEPGATE_ADMIN_TOKEN'
elif [[ -n ${SWEEPGATE_ADMIN_TOKEN_FILE:-} ]]; then
	token_where="in $SWEEPGATE_ADMIN_TOKEN_FILE (\$SWEEPGATE_ADMIN_TOKEN_FILE)"
else
	token_file=$data/etcd/admin-token
	[[ -f $token_file ]] || die "sweepgate is ready but its admin token file $token_file is missing; see $sweepgate_log"
	token_where="in $token_file (generated by sweepgate, mode 0600)"
fi

# ---- banner -------------------------------------------------------------------
# The lines "endpoint:", "access key:", "secret key:" are read by
# e2e/makerun_test.go, and "admin token:" and the line with "reclaim status
# --config" by e2e/admin_host_test.go; keep their format.

cat <<EOF

sweepgate is running.

  endpoint:    $endpoint
  access key:  $access_key
  secret key:  $secret_key
  region:      $region (clients sign for this region; address buckets path-style)
  admin:       $admin_url/metrics  $admin_url/healthz  $admin_url/readyz
  admin token: $token_where
  MinIO:       $minio_url (direct, bypassing sweepgate; console http://$host:$console_port)
  pids:        sweepgate $sweepgate_pid, minio $minio_pid
  logs:        $sweepgate_log
               $minio_log

Try it (aws CLI):

  AWS_ACCESS_KEY_ID=$access_key AWS_SECRET_ACCESS_KEY=$secret_key AWS_DEFAULT_REGION=$region aws --endpoint-url $endpoint s3 mb s3://demo
  echo hello > hello.txt
  AWS_ACCESS_KEY_ID=$access_key AWS_SECRET_ACCESS_KEY=$secret_key AWS_DEFAULT_REGION=$region aws --endpoint-url $endpoint s3 cp hello.txt s3://demo/hello.txt
  AWS_ACCESS_KEY_ID=$access_key AWS_SECRET_ACCESS_KEY=$secret_key AWS_DEFAULT_REGION=$region aws --endpoint-url $endpoint s3 ls s3://demo/

aws-sdk-go-v2:

  cfg, _ := config.LoadDefaultConfig(ctx, config.WithRegion("$region"),
      config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("$access_key", "$secret_key", "")))
  client := s3.NewFromConfig(cfg, func(o *s3.Options) {
      o.BaseEndpoint = aws.String("$endpoint")
      o.UsePathStyle = true
  })

minio-go:

  client, _ := minio.New("$(connect_host "$listen")", &minio.Options{
      Creds: credentials.NewStaticV4("$access_key", "$secret_key", ""), Secure: false, Region: "$region"})

rclone (no config file needed):

  RCLONE_CONFIG_SG_TYPE=s3 RCLONE_CONFIG_SG_PROVIDER=Minio RCLONE_CONFIG_SG_ENDPOINT=$endpoint \\
  RCLONE_CONFIG_SG_ACCESS_KEY_ID=$access_key RCLONE_CONFIG_SG_SECRET_ACCESS_KEY=$secret_key \\
  rclone lsd sg:

s3cmd:

  s3cmd --host=$(connect_host "$listen") --host-bucket=$(connect_host "$listen") --no-ssl \\
    --access_key=$access_key --secret_key=$secret_key ls

Admin commands (they find the admin listener and its token through the
configuration; the status page $admin_url/ asks for the token once):

  $sweepgate_bin reclaim status --config $config
  $sweepgate_bin sessions list --config $config

Press Ctrl-C to stop both servers.
EOF

# ---- wait -----------------------------------------------------------------------
# wait -n returns when either child ends; a signal interrupts it and runs
# on_signal. A child that ends on its own is a failure: stop the other one.
set +e
wait -n "$minio_pid" "$sweepgate_pid"
rc=$?
set -e
((stopping)) && exit 0
if ! kill -0 "$sweepgate_pid" 2>/dev/null; then
	show_log sweepgate "$sweepgate_log"
	say "sweepgate exited unexpectedly (status $rc)"
else
	show_log MinIO "$minio_log"
	say "MinIO exited unexpectedly (status $rc)"
fi
stop_all
exit 1
