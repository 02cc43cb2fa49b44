//! ordo-serve's integration tests, one binary with a module per topic: `ctl_*` drive a whole server
//! in-process (config → classification → gate → backends → admin), `http*` and `tls` the protocol layers;
//! `ctl_util` and `http_util` are their shared harnesses. One binary links once, where thirteen did.

mod ctl_util;
mod http_util;

mod ctl_adaptive;
mod ctl_admin;
mod ctl_cancel;
mod ctl_classify;
mod ctl_config;
mod ctl_disconnect;
mod ctl_gate_threads;
mod ctl_lanes;
mod ctl_lua;
mod ctl_lua_sandbox;
mod ctl_overload;
mod ctl_priority;
mod ctl_reload;
mod ctl_seed003;
mod ctl_shutdown;
mod ctl_threads;
mod edge;
mod fleet;
mod fuzz_conn;
mod http2;
mod http_backends;
mod http_forwarded;
mod http_inline;
mod http_proxy_hostile;
mod http_sendfile;
mod http_server;
mod http_upstreams;
mod http_vhosts;
mod tls;
