// InspectorError: the errors of presenting and post-processing reports.
import StallWatch

/// An error from presenting or post-processing reports: StallWatch's own error shape (a stable code, a message a
/// user can act on, and its context), so the inspector throws neither the command line's error nor a copy of it.
public typealias InspectorError = StallWatchError
