#!/usr/bin/env bash
# An nginx standing in for FCM and its token endpoint, APNs (/3/device/…) and a browser push
# service (/push/…): TLS with a self-signed certificate made now, HTTP/2, and fixed answers as
# each gives them. For the HTTP client's tests and benchmarks.
# With UPSTREAM (a port on 127.0.0.1), it is instead the TLS and HTTP/2 front of the emulator
# there, as push services are https: every request is passed on to it. With CLIENT_CA (a PEM
# file), it also asks for a client certificate signed by it, as APNs does, and tells the
# emulator the verdict in X-Client-Verify (SUCCESS, FAILED:… or NONE). With PROTOCOL http/1.1,
# it offers no HTTP/2 (as a server without it); empty arguments are the defaults.
#
#   nginx-standin.sh start DIR [REQUESTS] [UPSTREAM] [CLIENT_CA] [PROTOCOL]   # prints the port; DIR/cert.pem is the CA bundle to trust
#   nginx-standin.sh stop DIR
#
# With REQUESTS, nginx ends each connection with a GOAWAY after that many requests, as Google's
# front ends end connections from time to time; without it, connections last the whole run.
#
# The access log (DIR/access.log) records each request's connection serial number and its
# count on that connection, so tests can see how requests were multiplexed, and last the
# client certificate's verdict.
set -euo pipefail
command=${1:?start or stop}
dir=${2:?a directory}
requests=${3:-10000000}
upstream=${4:-}
client_ca=${5:-}
protocol=${6:-}

case "$command" in
start)
  mkdir -p "$dir/tmp"
  chmod 777 "$dir/tmp"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
  head -c 2097152 /dev/zero >"$dir/big.bin"
  if [ -n "$upstream" ]; then
    locations="location / {
            proxy_pass http://127.0.0.1:$upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header X-Client-Verify \$ssl_client_verify;
        }"
  else
    # An access token as long as Google's for a service account: padded with dots to 1,024
    # characters since 2021 (googleapis/google-auth-library-nodejs#1499; Google documents up to
    # 2,048 bytes). HTTP/2 never indexes an authorization header, so each request carries it
    # whole: a short token made every FCM send look cheaper than a real one.
    token="ya29.standin-access-token$(printf '%*s' 999 '' | tr ' ' '.')"
    locations="location = /token {
            return 200 '{\"access_token\":\"$token\",\"expires_in\":3599,\"token_type\":\"Bearer\"}';
        }
        # APNs: 200, an empty body, the request's apns-id echoed (and a unique id, as in development).
        location /3/device/ {
            add_header apns-id \$http_apns_id always;
            add_header apns-unique-id 6f1d0a64-4b0e-4e61-9a6b-2f1c3c2b8d01 always;
            return 200;
        }
        # A server that answers far more than any push service does (2 MiB).
        location = /big {
            alias $dir/big.bin;
        }
        # A browser push service (RFC 8030 §5): 201 and the message's Location.
        location /push/ {
            add_header Location https://127.0.0.1/m/\$request_id always;
            return 201;
        }
        location / {
            return 200 '{\"name\":\"projects/standin/messages/0:1700000000000000%0\"}';
        }"
  fi
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    log_format standin '\$connection \$connection_requests \$server_protocol \$request_method \$uri \$status \$ssl_client_verify';
    access_log $dir/access.log standin buffer=64k flush=100ms;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    # nginx closes a connection after 1000 requests by default.
    keepalive_requests $requests;
    keepalive_timeout 300s;
    http2_max_concurrent_streams 256;
    server {
        listen 127.0.0.1:$port ssl$([ "$protocol" = http/1.1 ] || echo ' http2');
        ssl_certificate $dir/cert.pem;
        ssl_certificate_key $dir/key.pem;
        ${client_ca:+ssl_client_certificate $client_ca; ssl_verify_client optional;}
        default_type application/json;
        $locations
    }
}
CONF
  # nginx daemonizes; it must not keep our stdout open, or a caller reading it would wait forever.
  for attempt in 1 2 3; do
    nginx -c "$dir/nginx.conf" -e "$dir/error.log" </dev/null >/dev/null 2>&1 && break
    if [ "$attempt" = 3 ]; then
      cat "$dir/error.log" >&2
      exit 1
    fi
    # The port was taken between choosing it and binding it (by another test): another one.
    fresh=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
    sed -i "s/listen 127.0.0.1:$port /listen 127.0.0.1:$fresh /" "$dir/nginx.conf"
    port=$fresh
  done
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  echo "$port"
  ;;
stop)
  # Wait for nginx to go: it writes its log and removes its pid file as it exits, and a caller
  # that deletes DIR meanwhile would leave it behind.
  if [ -f "$dir/nginx.pid" ] && pid=$(cat "$dir/nginx.pid") && kill "$pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
