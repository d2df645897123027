// Drives a connection's state (CHTTP2/connection_state.c) through any order of events, at any
// pace, and checks what must hold whatever happens: a closed connection stays closed, phases only
// go forward, opening has a deadline and each address at most 2 s of it, a PING goes to a quiet
// connection with streams (and only to one), a connection is given up as stalled only after a
// PING that went unanswered (and always then), a drained or ended connection is closed, and the
// events whose callers go on using the connection never close it.
// Each event is three bytes: its kind, the milliseconds since the last (times 8), and the streams
// and whether addresses are left (bits). The input's first byte sets the stall limit.
#include "../../Sources/CHTTP2/h2_internal.h"

#define CHECK(condition)                                                                                  \
    do {                                                                                                  \
        if (!(condition)) {                                                                               \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #condition);                              \
            abort();                                                                                      \
        }                                                                                                 \
    } while (0)

static int is_close(connection_action action) {
    return action == ACTION_FAIL_OPENING || action == ACTION_OPEN_TIMED_OUT || action == ACTION_CLOSE ||
           action == ACTION_CLOSE_ENDED || action == ACTION_CLOSE_SESSION_ENDED || action == ACTION_CLOSE_STALLED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const long connect_timeout = 10000;
    long stall = (long)data[0] * 40;  // 0 (none) to 10.2 s
    int64_t now = 1000000, created = now;
    connection_state s = h2_connection_state_new(now, connect_timeout);
    // What the checks remember, apart from the state: when the server was last heard from, since
    // when the connection has been quiet (heard from, or an idle connection began to wait), when
    // a PING went unanswered, whether the opening was reported.
    int64_t received = 0, quiet = 0, pinged = 0, attempt_started = 0;
    int reported = 0;
    for (size_t i = 1; i + 3 <= size; i += 3) {
        connection_event e = {
            .kind = (connection_event_kind)(data[i] % (EVENT_CLOSED + 1)),
            .now = now += (int64_t)data[i + 1] * 8,
            .streams = data[i + 2] & 3,
            .more_addresses = (data[i + 2] >> 2) & 1,
            .session_ended = (data[i + 2] >> 3) & 1,
            .stall_ms = stall,
        };
        connection_phase before = s.phase;
        connection_action action = h2_connection_step(&s, &e);
        connection_phase after = s.phase;

        CHECK(after >= before);  // phases only go forward
        if (e.kind == EVENT_CONNECTING || e.kind == EVENT_OPENED || e.kind == EVENT_STREAM_STARTED ||
            e.kind == EVENT_RECEIVED || e.kind == EVENT_NO_MORE_STREAMS)
            CHECK(!is_close(action));
        if (before == PHASE_CLOSED) CHECK(action == ACTION_NONE && after == PHASE_CLOSED);
        if (is_close(action)) CHECK(after == before);  // closing is the driver's, then EVENT_CLOSED
        if (action == ACTION_FAIL_OPENING || action == ACTION_OPEN_TIMED_OUT || action == ACTION_NEXT_ADDRESS)
            CHECK(h2_phase_is_opening(before));
        if (action == ACTION_CLOSE || action == ACTION_CLOSE_ENDED || action == ACTION_CLOSE_SESSION_ENDED ||
            action == ACTION_CLOSE_STALLED || action == ACTION_PING)
            CHECK(h2_phase_is_open(before));
        if (action == ACTION_HANDSHAKE) CHECK(e.kind == EVENT_CONNECTED && after == PHASE_HANDSHAKING);
        if (e.kind == EVENT_CONNECTED && before == PHASE_CONNECTING) CHECK(action == ACTION_HANDSHAKE);
        if (action == ACTION_NEXT_ADDRESS) CHECK(e.more_addresses);
        if (action == ACTION_CLOSE_ENDED) CHECK(before == PHASE_DRAINING && e.streams == 0);
        if (e.kind == EVENT_SENT && before == PHASE_DRAINING && e.streams == 0) CHECK(action == ACTION_CLOSE_ENDED);
        if (e.kind == EVENT_SENT && h2_phase_is_open(before) && action != ACTION_CLOSE_ENDED)
            CHECK((action == ACTION_CLOSE_SESSION_ENDED) == (e.session_ended != 0));
        // Each address has its share of the opening, no more: past it, the next is tried.
        if (e.kind == EVENT_CONNECTING && (before == PHASE_RESOLVING || before == PHASE_CONNECTING))
            attempt_started = e.now;
        if (e.kind == EVENT_TICK && before == PHASE_CONNECTING && e.now < created + connect_timeout)
            CHECK((action == ACTION_NEXT_ADDRESS) == (e.more_addresses && e.now >= attempt_started + 2000));
        // Opening has a deadline: a look at the clock past it gives up, and nothing before it does.
        if (e.kind == EVENT_TICK && h2_phase_is_opening(before))
            CHECK((action == ACTION_OPEN_TIMED_OUT) == (e.now >= created + connect_timeout));
        if (e.kind == EVENT_FAILED && before != PHASE_CLOSED)
            CHECK(action == (h2_phase_is_opening(before) ? ACTION_FAIL_OPENING : ACTION_CLOSE));
        if (action == ACTION_REPORT_OPENED) {
            CHECK(e.kind == EVENT_STREAM_STARTED && !reported);
            reported = 1;
        }
        if (e.kind == EVENT_STREAM_STARTED && before == PHASE_OPEN) CHECK(reported);

        // Liveness, as the checks see it.
        if (h2_phase_is_open(before)) {
            if (e.kind == EVENT_RECEIVED) received = quiet = e.now, pinged = 0;
            if (e.kind == EVENT_STREAM_STARTED && e.streams == 1 && before == PHASE_OPEN) quiet = e.now;
            if (e.kind == EVENT_TICK && (stall <= 0 || e.streams == 0)) pinged = 0;
        }
        if (before == PHASE_HANDSHAKING && after == PHASE_OPEN) received = quiet = e.now;
        // A quiet connection with streams is PINGed once it has been quiet for half the limit.
        if (e.kind == EVENT_TICK && h2_phase_is_open(before) && stall > 0 && e.streams > 0 && !pinged &&
            e.now - quiet >= stall / 2)
            CHECK(action == ACTION_PING);
        if (action == ACTION_PING) {
            CHECK(stall > 0 && e.streams > 0 && !pinged && e.now - quiet >= stall / 2);
            pinged = e.now;
        }
        if (action == ACTION_CLOSE_STALLED) {
            // A PING went unanswered for half the limit, and nothing came for the whole of it.
            CHECK(pinged && e.now - pinged >= stall / 2 && e.now - received >= stall - stall % 2);
        }
        if (e.kind == EVENT_TICK && h2_phase_is_open(before) && stall > 0 && e.streams > 0 && pinged &&
            e.now - pinged >= stall / 2)
            CHECK(action == ACTION_CLOSE_STALLED);

        if (is_close(action)) {
            h2_connection_step(&s, &(connection_event){.kind = EVENT_CLOSED, .now = now});
            CHECK(s.phase == PHASE_CLOSED);
        }
    }
    return 0;
}
