// The report sections of a stall on the Swift Concurrency pool: the stuck job's task, and the pool when saturated.

extension StallReport {
    /// The Swift task whose job ran past the threshold without suspending (the `task` section).
    package struct TaskDescription: Codable, Sendable, Equatable {
        /// The runtime's task id (`swift_task_getJobTaskId`); 0 for a job that is not a task.
        package var id: UInt64
        /// The name given with `Task(name:)`; absent when the runtime does not expose it for another thread's task.
        package var name: String?
        /// Swift's `TaskPriority` raw value (`userInitiated` 25, `medium` 21, `utility` 17, `background` 9).
        package var priority: Int
        /// What the priority is called (`high`, `medium`, `low`, `background`, `userInteractive`, `unspecified`).
        package var priorityName: String
        /// How long the job waited between enqueue and start, ms.
        var queuedMs: Double?

        package init(id: UInt64, name: String? = nil, priority: Int, queuedMs: Double? = nil) {
            self.id = id
            self.name = name
            self.priority = priority
            self.priorityName = Self.name(ofPriority: priority)
            self.queuedMs = queuedMs
        }

        static func name(ofPriority priority: Int) -> String {
            switch priority {
            case 0x21...: return "userInteractive"
            case 0x19..<0x21: return "high"
            case 0x15..<0x19: return "medium"
            case 0x11..<0x15: return "low"
            case 0x01..<0x11: return "background"
            default: return "unspecified"
            }
        }
    }

    /// The pool at a saturation: every worker busy past the threshold while jobs waited (the `pool` section).
    package struct PoolDescription: Codable, Sendable, Equatable {
        /// One busy worker and its job.
        package struct Worker: Codable, Sendable, Equatable {
            var threadId: Int32
            var task: TaskDescription
            /// How long the job had run when the saturation was detected, ms.
            var runningMs: Double
            /// The worker's stack at detection (innermost first); empty when it could not be captured.
            var frames: [StackFrame]
            var error: String?

            package init(
                threadId: Int32, task: TaskDescription, runningMs: Double, frames: [StackFrame] = [],
                error: String? = nil
            ) {
                self.threadId = threadId
                self.task = task
                self.runningMs = runningMs
                self.frames = frames
                self.error = error
            }
        }

        /// The pool's width: workers that run jobs of one priority at once.
        var width: Int
        /// Jobs enqueued and not yet started at detection.
        var waitingJobs: Int
        var workers: [Worker]

        package init(width: Int, waitingJobs: Int, workers: [Worker]) {
            self.width = width
            self.waitingJobs = waitingJobs
            self.workers = workers
        }
    }
}
