// Reading, summarising and rendering stall reports.
import StallWatch
public enum ReportInspector {}
