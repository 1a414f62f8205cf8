import java.nio.file.Path;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordingFile;

/**
 * Prints each CPU sample ({@code jdk.ExecutionSample}) of a JFR recording as one line of its
 * stack's frames, outermost first, {@code ;}-separated ({@code Class.method}), in the folded form
 * flame-graph tools read once counted. Run from source: {@code java CollapsedStacks.java FILE}.
 */
public final class CollapsedStacks {
    private CollapsedStacks() {
    }

    public static void main(String[] args) throws Exception {
        StringBuilder line = new StringBuilder();
        try (RecordingFile recording = new RecordingFile(Path.of(args[0]))) {
            while (recording.hasMoreEvents()) {
                RecordedEvent event = recording.readEvent();
                RecordedStackTrace stack = event.getStackTrace();
                if (!"jdk.ExecutionSample".equals(event.getEventType().getName()) || stack == null) {
                    continue;
                }
                line.setLength(0);
                var frames = stack.getFrames();
                for (int index = frames.size() - 1; index >= 0; index--) {
                    RecordedFrame frame = frames.get(index);
                    if (line.length() > 0) {
                        line.append(';');
                    }
                    line.append(frame.getMethod().getType().getName()).append('.')
                            .append(frame.getMethod().getName());
                }
                System.out.println(line);
            }
        }
    }
}
