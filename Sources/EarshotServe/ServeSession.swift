import Earshot

/// A protocol on the service's loop (`ServeLoop`): one session per connection. The loop owns the
/// sockets, the streams' audio and the ticks; a session reads its client's bytes as the protocol's
/// events, starts, feeds and stops its connection's stream through the loop, and turns the
/// models' events into the protocol's answers. Adding a protocol is adding a session type.
///
/// Every method runs on the loop's thread.
protocol ServeSession: AnyObject, SendableMetatype {
    /// What every session of one service shares (its models' answers to `describe`, ...).
    associatedtype Service
    /// What a stream of this protocol keeps beside its audio (formats, timestamps, ...).
    associatedtype StreamState

    /// The session of a new connection.
    init(service: Service, options: ServeOptions)

    /// A failure as the protocol tells it to its client (a timeout, a full or stopping server).
    static func errorMessage(_ text: String, code: String) -> [UInt8]

    /// Bytes read from the client: the events they complete are handled in order. Returns how
    /// many events were completed, or nil when the connection failed (the loop was told).
    func received(_ bytes: UnsafeRawBufferPointer, on connection: ServeConnection<Self>, loop: ServeLoop<Self>) -> Int?

    /// Whether an event has begun and not ended (its timeout runs meanwhile).
    var isMidEvent: Bool { get }

    /// A model's event for the connection's stream (whose `failed` is already set for `.failed`).
    func deliver(_ event: ClassifierEvent, model: Int, stream: ServeStream<StreamState>,
                 on connection: ServeConnection<Self>, loop: ServeLoop<Self>)

    /// The stream ended (its client stopped it, or the server is stopping) after its last
    /// events were delivered.
    func finished(_ stream: ServeStream<StreamState>, on connection: ServeConnection<Self>, loop: ServeLoop<Self>)
}

/// One client's connection on the loop, with its protocol's session.
final class ServeConnection<Session: ServeSession> {
    let token: UInt64
    let readFD: Int32
    let writeFD: Int32
    let peer: String
    let session: Session
    var out: [UInt8] = []
    var outOffset = 0
    var waitingToWrite = false
    var paused = false
    var closing = false
    /// Whether epoll can watch it (not for a regular file on standard input).
    var pollable = true
    /// Its event and idle timeouts' clocks.
    var clocks: ClientClocks
    /// Its stream, from the protocol's start to its stop.
    var stream: ServeStream<Session.StreamState>?
    /// When a closing connection is closed even if its last events are not all taken.
    var closingDeadline: ContinuousClock.Instant?

    init(token: UInt64, readFD: Int32, writeFD: Int32, peer: String, session: Session, now: ContinuousClock.Instant) {
        self.token = token
        self.readFD = readFD
        self.writeFD = writeFD
        self.peer = peer
        self.session = session
        clocks = ClientClocks(lastReceived: now)
    }
}

/// The clocks of a client's two timeouts: since it last sent anything (--idle-timeout) and since
/// the event it is still sending began (--event-timeout). While the server does not read a
/// client (its audio is ahead of the model), neither runs against it: they restart when it is
/// read again, so a client the server holds back is never timed out for it.
struct ClientClocks: Equatable {
    var lastReceived: ContinuousClock.Instant
    var eventStarted: ContinuousClock.Instant?
    private(set) var paused = false

    enum Expired: Equatable { case event, idle }

    /// Bytes came at `now`: `midEvent` if they end inside an event, `completed` whether they
    /// finished at least one (the event clock then restarts with the next event).
    mutating func received(at now: ContinuousClock.Instant, midEvent: Bool, completed: Bool) {
        lastReceived = now
        if !midEvent {
            eventStarted = nil
        } else if completed || eventStarted == nil {
            eventStarted = now
        }
    }

    mutating func pause() { paused = true }

    mutating func resume(at now: ContinuousClock.Instant) {
        guard paused else { return }
        paused = false
        lastReceived = now
        if eventStarted != nil { eventStarted = now }
    }

    /// The timeout the client has passed at `now`, if any (none while paused).
    func expired(at now: ContinuousClock.Instant, eventTimeout: Double, idleTimeout: Double) -> Expired? {
        if paused { return nil }
        if let eventStarted, now - eventStarted > .seconds(eventTimeout) { return .event }
        if now - lastReceived > .seconds(idleTimeout) { return .idle }
        return nil
    }
}

/// One stream of a connection: where it runs in the engine, its audio not yet pushed, and what
/// its protocol keeps. A class, so that a chunk extends its buffers in place (a struct held by
/// the connection would be copied out and back per chunk).
final class ServeStream<State> {
    let shard: Int
    let channels: [Int?]
    /// Its audio's rate (Hz).
    let rate: Int
    /// Mono samples not yet pushed into its channels (keeps its capacity from tick to tick).
    var inbox: [Float] = []
    /// A model failed on it: its audio is no longer stepped.
    var failed = false
    var state: State

    init(shard: Int, channels: [Int?], rate: Int, state: State) {
        self.shard = shard
        self.channels = channels
        self.rate = rate
        self.state = state
    }
}
