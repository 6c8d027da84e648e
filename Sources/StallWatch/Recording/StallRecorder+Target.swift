// What a StallRecorder watches: which process, how it samples it, and how reports describe the detection.
#if canImport(Glibc)
    import Glibc
#endif

extension StallRecorder {
    /// The watched process and how stalls in it are detected and sampled; one report schema for all of them.
    package struct Target: Sendable {
        /// The process whose loop is watched (and whose /proc files and maps are read).
        package var processID: Int32
        /// `in-process`, `heartbeat` or `proc`: the report's `detection.source`.
        package var detectionSource: String
        /// Takes the stack samples; nil records samples without frames.
        package var sampler: (any StackSampling)?
        /// The report's `process` block.
        package var process: StallReport.ProcessDescription
        /// False when the loop's phase is not published (zero-instrumentation): reports say `unknown`.
        package var phaseKnown: Bool
        /// Problems met while setting up, repeated in every report's `capture.errors`.
        package var setupErrors: [String]

        package init(
            processID: Int32, detectionSource: String, sampler: (any StackSampling)?,
            process: StallReport.ProcessDescription, phaseKnown: Bool, setupErrors: [String] = []
        ) {
            self.processID = processID
            self.detectionSource = detectionSource
            self.sampler = sampler
            self.process = process
            self.phaseKnown = phaseKnown
            self.setupErrors = setupErrors
        }

        /// This process, sampled by signal.
        static func inProcess() -> Target {
            var errors: [String] = []
            var sampler: (any StackSampling)?
            do {
                let signal = try SignalSampler.shared()
                do {
                    sampler = SignalStackSampling(sampler: signal, unwinder: try StackUnwinder(processID: getpid()))
                } catch {
                    errors.append("unwinder unavailable: \(error.message)")
                }
            } catch {
                errors.append("in-process sampling unavailable: \(error.message)")
            }
            return Target(
                processID: getpid(), detectionSource: "in-process", sampler: sampler, process: ProcessIdentity.current,
                phaseKnown: true, setupErrors: errors)
        }
    }
}
