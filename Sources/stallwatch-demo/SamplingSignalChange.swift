// What `stall --sampling-signal` and `--block-signals` do to the loop: an application that takes StallWatch's
// signal back, or a loop thread that blocks every signal (signalfd style).
import Foundation
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// The disposition the demo gives the sampling signal after the watchdog started.
enum SamplingSignalChange: String, CaseIterable {
    /// `SIG_DFL`: a real-time signal sent now would kill the process.
    case `default`
    /// `SIG_IGN`.
    case ignore
    /// The demo's own handler, which counts what it receives.
    case handler

    /// Applies the change; prints `{"event":"sampling-signal","signal":N,"disposition":"…"}`.
    func apply() {
        guard let signal = try? SignalSampler.shared().signal else { return }
        var action = sigaction()
        sigemptyset(&action.sa_mask)
        switch self {
        case .default: action.__sigaction_handler.sa_handler = SIG_DFL
        case .ignore: action.__sigaction_handler.sa_handler = SIG_IGN
        case .handler: action.__sigaction_handler.sa_handler = { _ in demoHandlerRuns += 1 }
        }
        sigaction(signal, &action, nil)
        let line = #"{"event":"sampling-signal","signal":\#(signal),"disposition":"\#(rawValue)"}"# + "\n"
        FileHandle.standardOutput.write(Data(line.utf8))
    }
}

/// Signals the demo's own handler received (a plain counter is enough for a demo).
nonisolated(unsafe) var demoHandlerRuns = 0

/// Blocks every signal on the calling thread, as a loop reading a signalfd does.
func blockEverySignal() {
    var all = sigset_t()
    sigfillset(&all)
    pthread_sigmask(SIG_BLOCK, &all, nil)
}
