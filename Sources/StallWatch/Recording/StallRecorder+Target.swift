// What a StallRecorder watches: which process, how it samples it, and how reports describe the detection.
#if canImport(Glibc)
    import Glibc
#endif

extension StallRecorder {
    /// The watched process and how stalls in it are detected and sampled; one report schema for all of them.
    package struct Target: Sendable {
        /// The process whose loop is watched (and whose /proc files and maps are read).
        package var processID: Int32
        /// The report's `detection.source`.
        package var detectionSource: DetectionSource
        /// Takes the stack samples; nil records samples without frames.
        package var sampler: (any StackSampling)?
        /// The report's `process` block.
        package var process: StallReport.ProcessDescription
        /// False when the loop's phase is not published (zero-instrumentation): reports say `unknown`.
        package var phaseKnown: Bool
        /// Problems met while setting up, repeated in every report's `capture.errors`.
        package var setupErrors: [String]
        /// Samples a thread of another process (the holder of what the loop waits on, `cause.blockingProcess`);
        /// nil where the watcher must not stop other processes (the embedded watchdog).
        package var peerSampler: (@Sendable (_ processID: Int32) -> (any StackSampling)?)?

        package init(
            processID: Int32, detectionSource: DetectionSource, sampler: (any StackSampling)?,
            process: StallReport.ProcessDescription, phaseKnown: Bool, setupErrors: [String] = [],
            peerSampler: (@Sendable (_ processID: Int32) -> (any StackSampling)?)? = nil
        ) {
            self.peerSampler = peerSampler
            self.processID = processID
            self.detectionSource = detectionSource
            self.sampler = sampler
            self.process = process
            self.phaseKnown = phaseKnown
            self.setupErrors = setupErrors
        }

        /// This process, sampled through the non-interrupting helper, or by signal where ptrace is refused.
        static func inProcess() -> Target {
            var errors: [String] = []
            var sampler: (any StackSampling)?
            var helper: ThreadCaptureHelper?
            var helperUnavailable: String?
            do {
                helper = try ThreadCaptureHelper.shared()
            } catch {
                helperUnavailable = error.message
                errors.append(
                    "non-interrupting capture unavailable (\(error.message)); sampling by signal, and only threads "
                        + "running in user space")
            }
            let signal: SignalSampler?
            do {
                signal = try SignalSampler.shared()
            } catch {
                signal = nil
                if helper == nil { errors.append("in-process sampling unavailable: \(error.message)") }
            }
            if helper != nil || signal != nil {
                do {
                    sampler = InProcessStackSampling(
                        helper: helper, signal: signal, unwinder: try StackUnwinder(processID: getpid()),
                        helperUnavailable: helperUnavailable)
                } catch {
                    errors.append("unwinder unavailable: \(error.message)")
                }
            }
            return Target(
                processID: getpid(), detectionSource: .inProcess, sampler: sampler, process: ProcessIdentity.current,
                phaseKnown: true, setupErrors: errors)
        }
    }
}
