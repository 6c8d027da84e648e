// AsyncFrameWalker: the awaiting callers of a Swift async function, from its async context chain.
import CStallWatchCore
import CStallWatchUnwind

/// Recovers the Swift async frames above a job's partial function: the functions that awaited, each with its
/// resume point, which a return-address unwind cannot see (the job was started by `swift_job_run`, not called by
/// them).
///
/// On x86_64 every Swift async function keeps an extended frame record: its prologue pushes RBP and then R14
/// (the async context), and points RBP at the saved RBP, so the context of the running function is the word just
/// below its frame record, `[RBP − 8]`. An async context begins with `Parent` (the awaiting caller's context) and
/// `ResumeParent` (where that caller resumes). The Linux toolchain does not tag these frames (no bit 60 in the
/// saved RBP, as on Apple platforms), so the walker recognises the running partial function structurally: the
/// outermost frame outside the Concurrency runtime whose caller is inside it (`swift_job_run`), with a frame record inside
/// the frame that saved the caller's RBP. From its context it follows `Parent` links, at most ``maxDepth``, reading
/// every context with `process_vm_readv` (an address freed meanwhile reads as an error, never a fault) and keeping
/// only resume points inside a loaded image.
///
/// The runtime is found by its image name (`libswift_Concurrency.so`): a program linked with `-static-stdlib`
/// gets no async frames.
struct AsyncFrameWalker {
    /// Most awaiting callers followed from one job.
    static let maxDepth = 64
    let processID: Int32
    private var images: ImageMap?
    private var runtime: ImageMap.Image?
    private var searchedRuntime = false
    /// Why the last chain followed had no resume point.
    private var chainMiss: String?
    /// Why the last call found a job's partial function on the stack but recovered no awaiting caller; nil when
    /// it recovered them, or found no job.
    private(set) var lastMiss: String?

    init(processID: Int32) {
        self.processID = processID
    }

    /// `frames` with the awaiting callers (`.asyncResumePoint` frames) inserted above the job's partial function;
    /// unchanged when no job's async frame is on the stack.
    ///
    /// - Parameters:
    ///   - frames: The unwound stack, innermost first.
    ///   - registers: Each frame's stack and frame pointer, from the same unwind.
    ///   - capture: The copy the unwind read (the context slot of the frame record is in it).
    ///   - maxFrames: The most frames to return.
    mutating func insertAsyncFrames(
        into frames: [UnwoundFrame], registers: [sw_unwind_frame], capture: StackCapture, maxFrames: Int
    ) -> [UnwoundFrame] {
        lastMiss = nil
        let addresses = frames.map(\.address)
        guard addresses.count >= 2, registers.count == addresses.count, let runtime = runtimeImage() else {
            return frames
        }
        let inRuntime = { (address: UInt64) in address &- runtime.base < runtime.size }
        // From the outermost frame in: the job's function is the last one the runtime called. Frames further in
        // may be called by Swift code of the same library (`ContinuousClock.now`, `TaskLocal.withValue`).
        for index in (0..<(addresses.count - 1)).reversed() where inRuntime(addresses[index + 1] &- 1) {
            guard !inRuntime(addresses[index]) else { continue }
            let pointer = registers[index].frame_pointer
            // A frame record inside the frame (between its SP and its CFA; a partial function may reserve stack
            // before it) whose saved RBP is the one the unwinder restored for the caller.
            let caller = registers[index + 1]
            guard pointer != 0, pointer % 8 == 0, pointer > registers[index].stack_pointer,
                pointer &+ 16 <= caller.stack_pointer, Self.stackWord(at: pointer, in: capture) == caller.frame_pointer,
                let context = Self.stackWord(at: pointer &- 8, in: capture)
            else {
                lastMiss =
                    "async frames: frame \(index)'s frame record \(pointer.hexAddress) (sp "
                    + "\(registers[index].stack_pointer.hexAddress), holding "
                    + "\(Self.stackWord(at: pointer, in: capture).map(\.hexAddress) ?? "nothing copied")) is not its "
                    + "caller's (sp \(caller.stack_pointer.hexAddress), rbp \(caller.frame_pointer.hexAddress))"
                return frames
            }
            let chain = resumePoints(from: context)
            guard !chain.isEmpty else {
                lastMiss = "async frames: the context \(context.hexAddress) of frame \(index) \(chainMiss ?? "")"
                return frames
            }
            let walked = frames[...index] + chain.map(UnwoundFrame.asyncResumePoint) + frames[(index + 1)...]
            return Array(walked.prefix(maxFrames))
        }
        return frames
    }

    /// The resume points of the awaiting callers, innermost first, from the running function's context.
    private mutating func resumePoints(from start: UInt64) -> [UInt64] {
        chainMiss = nil
        var points: [UInt64] = []
        var context = start
        var seen = Set<UInt64>()
        while context != 0, context % 8 == 0, points.count < Self.maxDepth, seen.insert(context).inserted {
            var words: (UInt64, UInt64) = (0, 0)
            let read = withUnsafeMutableBytes(of: &words) {
                sw_read_memory(processID, context, $0.baseAddress, UInt($0.count))
            }
            guard read == 16, words.1 != 0, isInImage(words.1) else {
                if points.isEmpty {
                    chainMiss =
                        read != 16
                        ? "could not be read (\(read))"
                        : "resumes at \(words.1.hexAddress), in no loaded image"
                }
                break
            }
            points.append(words.1)
            context = words.0
        }
        return points
    }

    private mutating func isInImage(_ address: UInt64) -> Bool {
        if images?.image(containing: address)?.isLoaded == true { return true }
        // A library loaded since the map was read: read it again once for this address.
        images = try? ImageMap(processID: processID)
        return images?.image(containing: address)?.isLoaded == true
    }

    private mutating func runtimeImage() -> ImageMap.Image? {
        if searchedRuntime { return runtime }
        searchedRuntime = true
        if images == nil { images = try? ImageMap(processID: processID) }
        // The loaded image, not a data mapping of the same file (libelf maps the ELF files it reads).
        runtime = images?.images.first { image in
            image.isLoaded && image.path.split(separator: "/").last?.hasPrefix("libswift_Concurrency.so") == true
        }
        return runtime
    }

    /// The 8-byte word at `address` in the capture's stack copy, or nil outside it.
    static func stackWord(at address: UInt64, in capture: StackCapture) -> UInt64? {
        guard address >= capture.stackPointer else { return nil }
        let offset = Int(address - capture.stackPointer)
        guard offset + 8 <= capture.stack.count else { return nil }
        var word: UInt64 = 0
        for byte in 0..<8 { word |= UInt64(capture.stack[offset + byte]) << (8 * UInt64(byte)) }
        return word
    }
}
