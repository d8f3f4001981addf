// Keeps the log lines of capture's own Spark jobs off the console (see _quiet.py).
//
// Capture reads what the user's block read after the block ran: a source the block
// removed meanwhile (a temporary directory, a dropped table) fails every task of the
// job, and Spark logs a page per task (ERROR Executor ... FileNotFoundException) and a
// line per job (ERROR TaskSetManager ... aborting job).  Capture copes with the failure
// (the source becomes coarse, with one warning); the pages would only alarm the user.
//
// A log4j filter on the appenders drops, and only drops, the events of capture's jobs:
// - an event logged in a task of one (an executor's task thread carries the local
//   properties of its job whose names start with "mdc." in its MDC, and capture marks
//   its jobs with MARK);
// - an event of Spark's scheduler about a stage of one (the stages are learnt from the
//   listener below, which sees the job group of each stage submitted, and from the
//   tasks' own events, which come first in local mode).
// Every other event, the user's among them, passes as before.  Janino reads Java
// without generics or lambdas: collections are used through their erased types.

import org.apache.logging.log4j.core.Filter;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.filter.AbstractFilter;
import org.apache.logging.log4j.core.filter.AbstractFilterable;

public class TensProvQuiet extends AbstractFilter {
    /** The local property capture sets on its jobs (read by executors as MDC). */
    public static final String MARK = "mdc.tensprov";
    /** The job groups of capture's jobs start with it. */
    public static final String GROUPS = "tensprov-lab-";
    // a stage number in a scheduler's message or a task's name: "... in stage 12.0 ..."
    private static final java.util.regex.Pattern STAGE =
        java.util.regex.Pattern.compile("stage (\\d+)\\.");
    // stages remembered at most (numbers only; forgotten all at once past it)
    private static final int MAX_STAGES = 100000;

    private final java.util.Set stages =
        java.util.Collections.newSetFromMap(new java.util.concurrent.ConcurrentHashMap());
    private final java.util.Set filtered =
        java.util.Collections.newSetFromMap(new java.util.WeakHashMap());
    private final java.util.concurrent.atomic.AtomicLong dropped =
        new java.util.concurrent.atomic.AtomicLong();
    private boolean listening;

    public TensProvQuiet() {
        super(Filter.Result.NEUTRAL, Filter.Result.NEUTRAL);
    }

    /** Drops the events of capture's jobs; every other passes. */
    public Filter.Result filter(LogEvent event) {
        try {
            org.apache.logging.log4j.util.ReadOnlyStringMap mdc = event.getContextData();
            if (mdc != null && (mdc.getValue(MARK) != null || mdc.getValue("tensprov") != null)) {
                // (the scheduler's lines about this task's stage come after it)
                learn(Thread.currentThread().getName());
                dropped.incrementAndGet();
                return Filter.Result.DENY;
            }
            String logger = event.getLoggerName();
            if (logger != null && logger.startsWith("org.apache.spark.scheduler.")
                    && !stages.isEmpty()) {
                Integer stage = stageOf(event.getMessage().getFormattedMessage());
                if (stage != null && stages.contains(stage)) {
                    dropped.incrementAndGet();
                    return Filter.Result.DENY;
                }
            }
        } catch (Throwable t) {
            // a filter that fails would lose the user's line: let it pass
        }
        return Filter.Result.NEUTRAL;
    }

    private static Integer stageOf(String text) {
        if (text == null) {
            return null;
        }
        java.util.regex.Matcher m = STAGE.matcher(text);
        return m.find() ? Integer.valueOf(m.group(1)) : null;
    }

    private void learn(String text) {
        Integer stage = stageOf(text);
        if (stage != null) {
            remember(stage.intValue());
        }
    }

    void remember(int stage) {
        if (stages.size() > MAX_STAGES) {
            stages.clear();
        }
        stages.add(Integer.valueOf(stage));
    }

    /** How many events were dropped so far. */
    public long dropped() {
        return dropped.get();
    }

    /** Whether stage {@code stage} is known as one of capture's. */
    public boolean isCaptures(int stage) {
        return stages.contains(Integer.valueOf(stage));
    }

    /** Puts the filter on every appender of Spark's loggers (those it is not on yet) and,
     *  the first time, the listener on {@code sc}; how many appenders it was added to. */
    public synchronized int install(org.apache.spark.SparkContext sc) {
        if (!listening) {
            sc.addSparkListener(new Stages(this));
            listening = true;
        }
        // Spark's own context: the one this class's loader would get is another
        org.apache.logging.log4j.core.Logger root = (org.apache.logging.log4j.core.Logger)
            org.apache.logging.log4j.LogManager.getLogger("org.apache.spark");
        java.util.Map appenders = root.getContext().getConfiguration().getAppenders();
        java.util.Iterator it = appenders.values().iterator();
        int added = 0;
        while (it.hasNext()) {
            Object appender = it.next();
            if (appender instanceof AbstractFilterable && !filtered.contains(appender)) {
                ((AbstractFilterable) appender).addFilter(this);
                filtered.add(appender);
                added++;
            }
        }
        return added;
    }

    /** Learns the stages of capture's jobs as Spark submits them. */
    public static class Stages extends org.apache.spark.scheduler.SparkListener {
        private final TensProvQuiet quiet;

        public Stages(TensProvQuiet quiet) {
            this.quiet = quiet;
        }

        public void onStageSubmitted(org.apache.spark.scheduler.SparkListenerStageSubmitted e) {
            java.util.Properties props = e.properties();
            if (props == null) {
                return;
            }
            String group = props.getProperty("spark.jobGroup.id");
            if (props.getProperty(MARK) != null
                    || (group != null && group.startsWith(GROUPS))) {
                quiet.remember(e.stageInfo().stageId());
            }
        }
    }
}
