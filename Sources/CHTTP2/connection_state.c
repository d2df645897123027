// A connection's life as one value (connection_state): every transition is here, and each says
// what the connection must do next. Nothing here touches a socket or a session; connection.c
// does the I/O and carries the actions out, and Tests/Fuzz/fuzz_connection_state.c drives these
// transitions through any order of events, checking what must always hold.
//
// EVENT_CONNECTING, EVENT_OPENED, EVENT_STREAM_STARTED, EVENT_RECEIVED and EVENT_NO_MORE_STREAMS
// never close the connection: their callers go on using it (reading into its session, or inside
// one of nghttp2's callbacks). The fuzz target holds this.
#include "h2_internal.h"

connection_state h2_connection_state_new(int64_t now, long connect_timeout_ms) {
    // Half the time to open, and no more than 2 s, for one address before the next is tried.
    long attempt = connect_timeout_ms / 2;
    return (connection_state){
        .phase = PHASE_RESOLVING,
        .open_deadline = now + connect_timeout_ms,
        .attempt_ms = attempt < 2000 ? attempt : 2000,
    };
}

/// The sweep's look at an open connection: something to answer for and nothing heard for half
/// the stall limit, a PING; still nothing for the other half, it is given up.
static connection_action check_liveness(connection_state *s, const connection_event *e) {
    if (e->stall_ms <= 0 || e->streams == 0) {
        s->pinged = 0;
        return ACTION_NONE;
    }
    int64_t half = e->stall_ms / 2;
    if (!s->pinged) {
        if (e->now - s->quiet_since < half) return ACTION_NONE;
        s->pinged = e->now;
        return ACTION_PING;
    }
    return e->now - s->pinged >= half ? ACTION_CLOSE_STALLED : ACTION_NONE;
}

connection_action h2_connection_step(connection_state *s, const connection_event *e) {
    if (s->phase == PHASE_CLOSED) return ACTION_NONE;
    switch (e->kind) {
    case EVENT_CONNECTING:
        if (s->phase != PHASE_RESOLVING && s->phase != PHASE_CONNECTING) return ACTION_NONE;
        s->phase = PHASE_CONNECTING;
        s->attempt_deadline = e->now + s->attempt_ms;
        return ACTION_NONE;
    case EVENT_CONNECTED:
        if (s->phase != PHASE_CONNECTING) return ACTION_NONE;
        s->phase = PHASE_HANDSHAKING;
        return ACTION_HANDSHAKE;
    case EVENT_CONNECT_FAILED:
        if (s->phase != PHASE_CONNECTING) return ACTION_NONE;
        return e->more_addresses ? ACTION_NEXT_ADDRESS : ACTION_FAIL_OPENING;
    case EVENT_OPENED:
        if (s->phase != PHASE_HANDSHAKING) return ACTION_NONE;
        s->phase = PHASE_OPEN;
        s->quiet_since = e->now;
        return ACTION_NONE;
    case EVENT_STREAM_STARTED:
        if (s->phase != PHASE_OPEN) return ACTION_NONE;
        // An idle connection's silence was no one's concern; it is from now on.
        if (e->streams == 1) s->quiet_since = e->now;
        if (s->carried_a_stream) return ACTION_NONE;
        s->carried_a_stream = 1;
        return ACTION_REPORT_OPENED;
    case EVENT_RECEIVED:
        if (h2_phase_is_opening(s->phase)) return ACTION_NONE;
        s->quiet_since = e->now;
        s->pinged = 0;
        return ACTION_NONE;
    case EVENT_NO_MORE_STREAMS:
        if (s->phase == PHASE_OPEN) s->phase = PHASE_DRAINING;
        return ACTION_NONE;
    case EVENT_SENT:
        if (h2_phase_is_opening(s->phase)) return ACTION_NONE;
        // Nothing more to say or hear: the server's GOAWAY came and its streams are done, or
        // nghttp2 ended the session itself, answering a frame that broke the protocol.
        if (s->phase == PHASE_DRAINING && e->streams == 0) return ACTION_CLOSE_ENDED;
        return e->session_ended ? ACTION_CLOSE_SESSION_ENDED : ACTION_NONE;
    case EVENT_TICK:
        if (!h2_phase_is_opening(s->phase)) return check_liveness(s, e);
        if (e->now >= s->open_deadline) return ACTION_OPEN_TIMED_OUT;
        if (s->phase == PHASE_CONNECTING && e->more_addresses && e->now >= s->attempt_deadline)
            return ACTION_NEXT_ADDRESS;
        return ACTION_NONE;
    case EVENT_FAILED:
        return h2_phase_is_opening(s->phase) ? ACTION_FAIL_OPENING : ACTION_CLOSE;
    case EVENT_CLOSED:
        s->phase = PHASE_CLOSED;
        return ACTION_NONE;
    }
    return ACTION_NONE;
}
