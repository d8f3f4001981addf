// Reads and builds Catalyst plans in the JVM for capture (see Jvm.helper in _jvm.py).
//
// Compiled when first needed with Janino, the Java compiler Spark itself uses for
// generated code, so nothing is added to the classpath.  Every method answers in one
// py4j round trip what would otherwise take five to fifteen.  Janino reads Java without
// generics or lambdas: Scala collections are used through their erased types.
//
// Text goes back in pieces of at most REPLY bytes: py4j writes a longer answer in two
// TCP segments, and the second waits for the first one's delayed acknowledgement
// (about 40 ms on Linux), where a whole answer below the limit takes a tenth of a ms.

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.trees.TreePatternBits;
import org.apache.spark.sql.types.StructType;

public class TensProvHelper {
    private static final int REPLY = 7000;

    private final scala.Enumeration.Value planExpression =
        org.apache.spark.sql.catalyst.trees.TreePattern.PLAN_EXPRESSION();
    private final java.util.concurrent.ConcurrentHashMap rest =
        new java.util.concurrent.ConcurrentHashMap();
    private final java.util.concurrent.atomic.AtomicLong tokens =
        new java.util.concurrent.atomic.AtomicLong();
    // numbers given here start far above those Python gives (Jvm.ident counts from 1):
    // both put them into the same map, first come first served
    private final java.util.concurrent.atomic.AtomicLong numbers =
        new java.util.concurrent.atomic.AtomicLong(1L << 40);
    // py4j's table of the objects Python holds: a reply names an object by its id there
    // (as py4j's own replies do), and Python makes its proxy without a round trip
    private volatile py4j.Gateway gateway;

    /** Use the py4j gateway of {@code server} (py4j's GatewayServer, or the ClientServer
     *  pyspark runs) to hand objects to Python; whether it was found. */
    public boolean useGateway(Object server) {
        try {
            Object found = server;
            if (!(found instanceof py4j.GatewayServer)) {
                found = server.getClass().getMethod("getJavaServer").invoke(server);
            }
            gateway = ((py4j.GatewayServer) found).getGateway();
        } catch (Exception e) {
            gateway = null;
        }
        return gateway != null;
    }

    /** {@code o}'s id in py4j's table (put there, as py4j puts what it returns), or "". */
    private String handed(Object o) {
        py4j.Gateway g = gateway;
        return g == null ? "" : g.putNewObject(o);
    }

    /** The first piece of {@code text} after a token and a space: 0 when it is the whole
     *  text, else the token that {@link #more} gives the next piece for. */
    public String reply(String text) {
        if (text.length() > 64 * REPLY) {
            // one wait of a delayed acknowledgement costs less than sixty round trips
            return "0 " + text;
        }
        int end = 0;
        int bytes = 0;
        while (end < text.length()) {
            char c = text.charAt(end);
            // UTF-8 as py4j sends it: backslashes and line breaks escaped in two bytes
            int size = 3;
            int step = 1;
            if (c == '\\' || c == '\n' || c == '\r') {
                size = 2;
            } else if (c < 0x80) {
                size = 1;
            } else if (c < 0x800) {
                size = 2;
            } else if (Character.isHighSurrogate(c) && end + 1 < text.length()) {
                size = 4;
                step = 2;
            }
            if (bytes + size > REPLY) {
                break;
            }
            bytes += size;
            end += step;
        }
        if (end == text.length()) {
            return "0 " + text;
        }
        long token = tokens.incrementAndGet();
        rest.put(Long.valueOf(token), text.substring(end));
        return token + " " + text.substring(0, end);
    }

    /** The next piece of a reply (see {@link #reply}). */
    public String more(long token) {
        return reply((String) rest.remove(Long.valueOf(token)));
    }

    /** A Dataset's schema as JSON (pyspark's form), as a reply. */
    public String schemaJson(org.apache.spark.sql.Dataset ds) {
        return reply(ds.schema().json());
    }

    /** A tree's JSON, as a reply. */
    public String json(org.apache.spark.sql.catalyst.trees.TreeNode node) {
        return reply(node.toJSON());
    }

    private static void field(StringBuilder b, String text) {
        // counted in code points, as Python counts a string's characters
        b.append(text.codePointCount(0, text.length())).append(':').append(text);
    }

    /** The schema of a Dataset: its catalog string, its toString and each field name, every
     *  part as its length, a colon and its text. */
    public String columns(org.apache.spark.sql.Dataset ds) {
        StringBuilder b = new StringBuilder();
        schemaFields(b, ds.schema());
        return reply(b.toString());
    }

    private static void schemaFields(StringBuilder b, StructType schema) {
        String[] names = schema.fieldNames();
        field(b, schema.catalogString());
        field(b, schema.toString());
        for (int i = 0; i < names.length; i++) {
            field(b, names[i]);
        }
    }

    /** What capture asks of a Dataset a tracked call returns, in one answer (asked while
     *  the user's code runs, it saves a round trip per fact when the block ends): its
     *  plan's py4j id ("" without a gateway, see {@link #useGateway}), its plan's
     *  {@link #shape}, its plan's {@link #projectInfo} ("" for a plan that is no
     *  projection, "-" for null), then its {@link #columns}, every part as in
     *  {@link #columns}; null for a Dataset whose plan is not resolved (one built only to
     *  be used in another's expression, e.g. a subquery with outer references: asking
     *  its schema would fail, and Spark would log the failure). */
    public String recorded(org.apache.spark.sql.Dataset ds, java.util.Map known) {
        LogicalPlan plan = ((org.apache.spark.sql.classic.Dataset) ds).logicalPlan();
        if (!plan.resolved()) {
            return null;
        }
        StringBuilder b = new StringBuilder();
        field(b, handed(plan));
        field(b, shape(plan, known));
        String info = "";
        if (plan instanceof Project) {
            String text = projectText((Project) plan);
            info = text == null ? "-" : text;
        }
        field(b, info);
        schemaFields(b, ds.schema());
        return reply(b.toString());
    }

    /** A relation of files: its format's class, its number of partition columns, its
     *  number of options, each option's key and value, then each output attribute's
     *  expression id, name and type, every part as in {@link #columns}; null for
     *  another plan. */
    public String fileRelation(LogicalPlan node) {
        if (!(node instanceof org.apache.spark.sql.execution.datasources.LogicalRelation)) {
            return null;
        }
        org.apache.spark.sql.sources.BaseRelation relation =
            ((org.apache.spark.sql.execution.datasources.LogicalRelation) node).relation();
        if (!(relation instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation)) {
            return null;
        }
        org.apache.spark.sql.execution.datasources.HadoopFsRelation files =
            (org.apache.spark.sql.execution.datasources.HadoopFsRelation) relation;
        StringBuilder b = new StringBuilder();
        field(b, files.fileFormat().getClass().getSimpleName());
        field(b, String.valueOf(files.partitionSchema().length()));
        field(b, wholeFile(files));
        scala.collection.Map options = files.options();
        field(b, String.valueOf(options.size()));
        scala.collection.Iterator it = options.iterator();
        while (it.hasNext()) {
            scala.Tuple2 kv = (scala.Tuple2) it.next();
            field(b, (String) kv._1());
            field(b, (String) kv._2());
        }
        scala.collection.Seq out = node.output();
        int n = out.size();
        for (int i = 0; i < n; i++) {
            Attribute a = (Attribute) out.apply(i);
            field(b, String.valueOf(a.exprId().id()));
            field(b, a.name());
            field(b, a.dataType().simpleString());
        }
        return reply(b.toString());
    }

    /** The scheme, raw path and size of the one file a relation reads, tab-separated,
     *  when a scan reads it whole (no larger than Spark's split size); else empty: the
     *  scan's parts are then asked of the planned scan ({@link #scanFiles}), which takes
     *  tens of ms. */
    private static String wholeFile(
            org.apache.spark.sql.execution.datasources.HadoopFsRelation files) {
        try {
            scala.collection.immutable.Seq none = scala.collection.immutable.Nil$.MODULE$;
            scala.collection.immutable.Seq dirs =
                (scala.collection.immutable.Seq) files.location().listFiles(none, none);
            if (dirs.size() != 1) {
                return "";
            }
            org.apache.spark.sql.execution.datasources.PartitionDirectory dir =
                (org.apache.spark.sql.execution.datasources.PartitionDirectory) dirs.apply(0);
            if (dir.files().size() != 1) {
                return "";
            }
            org.apache.spark.sql.execution.datasources.FileStatusWithMetadata file =
                (org.apache.spark.sql.execution.datasources.FileStatusWithMetadata)
                    dir.files().apply(0);
            long max = org.apache.spark.sql.execution.datasources.FilePartition$.MODULE$
                .maxSplitBytes(files.sparkSession(), dirs);
            if (file.getLen() > max) {
                return "";
            }
            java.net.URI uri = file.getPath().toUri();
            return uri.getScheme() + "\t" + uri.getRawPath() + "\t" + file.getLen();
        } catch (RuntimeException e) {
            return "";  // another Spark build: the planned scan tells
        }
    }

    /** How many jobs the status tracker knows in job group {@code group}: one round trip,
     *  where asking for the ids from Python takes two. */
    public int jobCount(org.apache.spark.SparkContext sc, String group) {
        return sc.statusTracker().getJobIdsForGroup(group).length;
    }

    /** How many tasks of job group {@code group} still run (one round trip): a cancelled
     *  job fails at once, while its tasks end when they next look. */
    public int activeTasks(org.apache.spark.SparkContext sc, String group) {
        org.apache.spark.SparkStatusTracker tracker = sc.statusTracker();
        int[] jobs = tracker.getJobIdsForGroup(group);
        int running = 0;
        for (int i = 0; i < jobs.length; i++) {
            scala.Option job = tracker.getJobInfo(jobs[i]);
            if (job.isEmpty()) continue;
            int[] stages = ((org.apache.spark.SparkJobInfo) job.get()).stageIds();
            for (int j = 0; j < stages.length; j++) {
                scala.Option stage = tracker.getStageInfo(stages[j]);
                if (!stage.isEmpty()) {
                    running += ((org.apache.spark.SparkStageInfo) stage.get()).numActiveTasks();
                }
            }
        }
        return running;
    }

    /** Drop the idle Python workers whose socket is closed; how many.  Spark 3.5 can put
     *  one there: a cancelled task gives its worker back to the pool and then, still not
     *  ended a moment later, has its monitor kill that worker (SPARK-54217), and the next
     *  Python task given it fails with "Socket is closed".  Spark 4's pool holds workers
     *  of another type, which are left alone. */
    public int dropClosedPythonWorkers() throws Exception {
        // SparkEnv by name: Janino reading its methods would load Spark 4's protobuf
        // classes, which the driver's class path lacks, and fail the whole helper
        Class envClass = Class.forName("org.apache.spark.SparkEnv");
        Object env = envClass.getMethod("get", new Class[0]).invoke(null, new Object[0]);
        if (env == null) return 0;
        java.lang.reflect.Field pools = envClass.getDeclaredField("pythonWorkers");
        pools.setAccessible(true);
        java.util.List factories = new java.util.ArrayList();
        synchronized (env) {  // SparkEnv makes and looks up its factories under its lock
            scala.collection.Iterator it = ((scala.collection.mutable.HashMap) pools.get(env)).valuesIterator();
            while (it.hasNext()) factories.add(it.next());
        }
        int dropped = 0;
        for (int i = 0; i < factories.size(); i++) {
            Object factory = factories.get(i);
            java.lang.reflect.Field idle = factory.getClass().getDeclaredField("idleWorkers");
            idle.setAccessible(true);
            synchronized (factory) {  // the factory hands out and takes back workers under it
                scala.collection.mutable.Queue queue = (scala.collection.mutable.Queue) idle.get(factory);
                int n = queue.size();
                for (int k = 0; k < n; k++) {
                    Object worker = queue.dequeue();
                    if (worker instanceof java.net.Socket && ((java.net.Socket) worker).isClosed()) {
                        dropped++;
                    } else {
                        queue.$plus$eq(worker);
                    }
                }
            }
        }
        return dropped;
    }

    /** A plan's output expression ids, space-separated. */
    public String outputIds(LogicalPlan node) {
        scala.collection.Seq out = node.output();
        StringBuilder b = new StringBuilder();
        int n = out.size();
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                b.append(' ');
            }
            b.append(((Attribute) out.apply(i)).exprId().id());
        }
        return reply(b.toString());
    }

    /** The output expression ids of a projection on the first line, then a line for each
     *  expression it adds to its child's output: its id and the ids it references.  Null
     *  when an added expression holds a subquery (whose outer references this does not
     *  read). */
    public String projectInfo(Project p) {
        String text = projectText(p);
        return text == null ? null : reply(text);
    }

    private String projectText(Project p) {
        StringBuilder b = new StringBuilder();
        scala.collection.Seq out = p.output();
        int n = out.size();
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                b.append(' ');
            }
            b.append(((Attribute) out.apply(i)).exprId().id());
        }
        scala.collection.Seq fresh = (scala.collection.Seq) p.projectList().diff(p.child().output());
        int m = fresh.size();
        for (int i = 0; i < m; i++) {
            NamedExpression e = (NamedExpression) fresh.apply(i);
            // a Scala trait's method: Janino finds it on the interface only
            if (((TreePatternBits) e).containsPattern(planExpression)) {
                return null;
            }
            b.append('\n').append(e.exprId().id());
            scala.collection.Iterator refs = ((Expression) e).references().iterator();
            while (refs.hasNext()) {
                b.append(' ').append(((Attribute) refs.next()).exprId().id());
            }
        }
        return b.toString();
    }

    /** Expression {@code e} for a read straight from files (see compile_tree in
     *  _direct.py), in pre-order, tokens separated by spaces: {@code A id} a column;
     *  {@code L type value} a constant, evaluated here ({@code N} null, {@code B1}/{@code B0},
     *  {@code I} and the integer, {@code D} and a double's bits in hex, {@code S} and a
     *  string's UTF-8 bytes in hex, {@code U} another type); {@code X} a constant that
     *  does not evaluate; {@code E class kids n} any other expression ({@code n} an
     *  AtLeastNNonNulls's count, else 0), then its children.  An alias, and a cast of a
     *  value to its own type, are their child. */
    public String exprTree(Expression e) {
        StringBuilder b = new StringBuilder();
        exprNode(e, b);
        return reply(b.toString());
    }

    /** {@link #exprTree} of the {@code i}-th expression of projection {@code p}. */
    public String projectEntryTree(Project p, int i) {
        return exprTree((Expression) p.projectList().apply(i));
    }

    private void exprNode(Expression e, StringBuilder b) {
        while (true) {
            if (e instanceof org.apache.spark.sql.catalyst.expressions.AttributeReference) {
                b.append(" A ").append(((Attribute) e).exprId().id());
                return;
            }
            // a value the reader may know by its id: an aggregate function's result over
            // the groups, an uncorrelated scalar subquery's one value
            if (e instanceof org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression) {
                b.append(" A ").append(
                        ((org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression) e)
                                .resultId().id());
                return;
            }
            if (e instanceof org.apache.spark.sql.catalyst.expressions.ScalarSubquery) {
                b.append(" A ").append(
                        ((org.apache.spark.sql.catalyst.expressions.ScalarSubquery) e).exprId().id());
                return;
            }
            if (e instanceof org.apache.spark.sql.catalyst.expressions.Alias) {
                e = ((org.apache.spark.sql.catalyst.expressions.Alias) e).child();
                continue;
            }
            if (e.foldable()) {
                constant(e, b);
                return;
            }
            if (e instanceof org.apache.spark.sql.catalyst.expressions.Cast) {
                Expression child = ((org.apache.spark.sql.catalyst.expressions.Cast) e).child();
                if (e.dataType().simpleString().equals(child.dataType().simpleString())) {
                    e = child;
                    continue;
                }
                // a cast to another type: its type (no spaces: one token), then the value
                b.append(" C ").append(e.dataType().simpleString().replace(' ', '_'));
                exprNode(child, b);
                return;
            }
            break;
        }
        if (e.getClass().getSimpleName().equals("Between")) {
            // Spark 4's BETWEEN: its replacement binds the input once (With), which
            // compares the same as lower <= input AND input <= upper for the
            // deterministic inputs a direct read takes
            try {
                Expression input = (Expression) e.getClass().getMethod("input").invoke(e);
                Expression lower = (Expression) e.getClass().getMethod("lower").invoke(e);
                Expression upper = (Expression) e.getClass().getMethod("upper").invoke(e);
                b.append(" E And 2 0 E GreaterThanOrEqual 2 0");
                exprNode(input, b);
                exprNode(lower, b);
                b.append(" E LessThanOrEqual 2 0");
                exprNode(input, b);
                exprNode(upper, b);
                return;
            } catch (ReflectiveOperationException ex) {
                // another Spark build: its replacement, which the reader refuses
            }
        }
        if (e instanceof org.apache.spark.sql.catalyst.expressions.Like
                && ((org.apache.spark.sql.catalyst.expressions.Like) e).escapeChar() != '\\') {
            b.append(" E LikeEscape 0 0");  // (an escape of the user's own: not read)
            return;
        }
        String name = e.getClass().getSimpleName();
        if (name.equals("Add") || name.equals("Subtract") || name.equals("Multiply")) {
            // arithmetic: the result type the analyzer gave it, then both operands
            b.append(" O ").append(e.dataType().simpleString().replace(' ', '_'))
                .append(' ').append(name);
            exprNode((Expression) e.children().apply(0), b);
            exprNode((Expression) e.children().apply(1), b);
            return;
        }
        scala.collection.Seq kids = e.children();
        int n = kids.size();
        int count = 0;
        if (e instanceof org.apache.spark.sql.catalyst.expressions.AtLeastNNonNulls) {
            count = ((org.apache.spark.sql.catalyst.expressions.AtLeastNNonNulls) e).n();
        }
        b.append(" E ").append(e.getClass().getSimpleName()).append(' ').append(n)
            .append(' ').append(count);
        for (int i = 0; i < n; i++) {
            exprNode((Expression) kids.apply(i), b);
        }
    }

    private void constant(Expression e, StringBuilder b) {
        org.apache.spark.sql.types.DataType type = e.dataType();
        Object value;
        try {
            value = e.eval(null);
        } catch (RuntimeException ex) {
            b.append(" X");
            return;
        }
        b.append(" L ").append(type.simpleString()).append(' ');
        if (value == null) {
            b.append('N');
        } else if (value instanceof Boolean) {
            b.append(((Boolean) value).booleanValue() ? "B1" : "B0");
        } else if (value instanceof Byte || value instanceof Short || value instanceof Integer
                || value instanceof Long) {
            b.append('I').append(((Number) value).longValue());
        } else if (value instanceof Double || value instanceof Float) {
            long bits = Double.doubleToRawLongBits(((Number) value).doubleValue());
            b.append('D').append(Long.toHexString(bits));
        } else if (value instanceof org.apache.spark.unsafe.types.UTF8String) {
            b.append('S');
            byte[] bytes = ((org.apache.spark.unsafe.types.UTF8String) value).getBytes();
            for (int i = 0; i < bytes.length; i++) {
                int x = bytes[i] & 0xff;
                b.append(Character.forDigit(x >> 4, 16)).append(Character.forDigit(x & 15, 16));
            }
        } else if (value instanceof org.apache.spark.sql.types.Decimal) {
            // the exact value, as plain digits (no exponent): Python's Decimal reads it
            b.append('M').append(
                ((org.apache.spark.sql.types.Decimal) value).toJavaBigDecimal().toPlainString());
        } else {
            b.append('U');
        }
    }

    /** The expression ids of the columns filter {@code f}'s condition reads (each
     *  AttributeReference in it, as its JSON lists them), space-separated: Catalyst writes
     *  a condition over many columns (a dropna) into JSON at about 0.4 ms a column.  Null
     *  when the condition holds a subquery. */
    public String filterRefs(org.apache.spark.sql.catalyst.plans.logical.Filter f) {
        Expression c = f.condition();
        if (((TreePatternBits) c).containsPattern(planExpression)) {
            return null;
        }
        StringBuilder b = new StringBuilder();
        references(c, b);
        return reply(b.toString());
    }

    private void references(Expression e, StringBuilder b) {
        if (e instanceof org.apache.spark.sql.catalyst.expressions.AttributeReference) {
            b.append(' ').append(((Attribute) e).exprId().id());
        }
        scala.collection.Seq kids = e.children();
        int n = kids.size();
        for (int i = 0; i < n; i++) {
            references((Expression) kids.apply(i), b);
        }
    }

    /** The projection {@code p} over {@code child}, passing {@code extra} on after its own
     *  expressions. */
    public LogicalPlan projectWith(Project p, scala.collection.immutable.Seq extra, LogicalPlan child) {
        // `:::` on Lists: one argument in Scala 2.12 and 2.13 alike (`++` takes a builder in 2.12)
        scala.collection.immutable.List list =
            extra.toList().$colon$colon$colon(p.projectList().toList());
        return new Project(list, child);
    }

    /** The number of {@code o} in {@code known} (see Jvm.ident), given now if it has none. */
    private long number(Object o, java.util.Map known) {
        Object had = known.get(o);
        if (had == null) {
            Long token = Long.valueOf(numbers.incrementAndGet());
            had = known.putIfAbsent(o, token);
            if (had == null) {
                return token.longValue();
            }
        }
        return ((Number) had).longValue();
    }

    /** What capture asks of every plan node it walks, in one answer: the node's number in
     *  {@code known}, 1 if its own expressions are deterministic (else 0), the number of
     *  each child, then a tab and its class's simple name. */
    public String shape(LogicalPlan node, java.util.Map known) {
        StringBuilder b = new StringBuilder();
        b.append(number(node, known));
        boolean deterministic = node.deterministic();
        if (!deterministic) {
            // the node's subtree is not; its own expressions may still be
            deterministic = true;
            scala.collection.Iterator exprs = node.expressions().iterator();
            while (exprs.hasNext()) {
                if (!((Expression) exprs.next()).deterministic()) {
                    deterministic = false;
                }
            }
        }
        b.append(deterministic ? " 1" : " 0");
        scala.collection.Iterator kids = node.children().iterator();
        while (kids.hasNext()) {
            b.append(' ').append(number(kids.next(), known));
        }
        return b.append('\t').append(node.getClass().getSimpleName()).toString();
    }

    /** The files a Dataset's scan reads, in the order Spark returns their records: a line
     *  per part of a file with its URI's scheme and raw path, the start and length of the
     *  part, the file's size and, for a Parquet file Spark splits, the ordinal and starting
     *  position of each row group the part reads ("ordinal:position", comma-separated; "*"
     *  for a whole file), tab-separated, as a reply.  Null when a partition of the Dataset
     *  is not a partition of files, or a file belongs to a partition directory (its
     *  partition values are not in the file). */
    public String scanFiles(org.apache.spark.sql.Dataset ds) throws java.io.IOException {
        org.apache.spark.sql.execution.FileSourceScanExec scan = scanOf(ds, false);
        if (scan == null) {
            return null;
        }
        boolean parquet = scan.relation().fileFormat()
            instanceof org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
        org.apache.spark.sql.execution.datasources.PartitionedFile[][] parts = filesOf(scan);
        if (parts == null) {
            return null;
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < parts.length; i++) {
            org.apache.spark.sql.execution.datasources.PartitionedFile[] files = parts[i];
            for (int j = 0; j < files.length; j++) {
                org.apache.spark.sql.execution.datasources.PartitionedFile f = files[j];
                if (f.partitionValues().numFields() != 0) {
                    return null;
                }
                java.net.URI uri = f.pathUri();
                b.append(uri.getScheme()).append('\t').append(uri.getRawPath())
                    .append('\t').append(f.start()).append('\t').append(f.length())
                    .append('\t').append(f.fileSize()).append('\t');
                if (f.start() == 0 && f.length() == f.fileSize()) {
                    b.append('*');
                } else if (parquet) {
                    rowGroups(b, ds.sparkSession(), f);
                } else {
                    b.append('-');
                }
                b.append('\n');
            }
        }
        return reply(b.toString());
    }

    /** The scan of files a Dataset is, down a chain of one-child nodes that keep its
     *  partitions and their records (whole-stage code, columns to rows and, with
     *  {@code projections}, projections); null for any other plan.  Its RDD's partitions
     *  are then those of the Dataset (asked of {@code inputRDD}, not of toRdd(): that
     *  compiles the code). */
    private static org.apache.spark.sql.execution.FileSourceScanExec scanOf(
            org.apache.spark.sql.Dataset ds, boolean projections) {
        org.apache.spark.sql.execution.SparkPlan node = ds.queryExecution().executedPlan();
        while (node.children().size() == 1) {
            String name = node.getClass().getSimpleName();
            if (!name.equals("WholeStageCodegenExec") && !name.equals("ColumnarToRowExec")
                && !name.equals("InputAdapter")
                && !(projections && name.equals("ProjectExec"))) {
                return null;
            }
            node = (org.apache.spark.sql.execution.SparkPlan) node.children().apply(0);
        }
        if (!(node instanceof org.apache.spark.sql.execution.FileSourceScanExec)) {
            return null;
        }
        return (org.apache.spark.sql.execution.FileSourceScanExec) node;
    }

    /** The parts of files each partition of a scan reads, in order; null when a
     *  partition is not a partition of files. */
    private static org.apache.spark.sql.execution.datasources.PartitionedFile[][] filesOf(
            org.apache.spark.sql.execution.FileSourceScanExec scan) {
        org.apache.spark.Partition[] parts = scan.inputRDD().partitions();
        org.apache.spark.sql.execution.datasources.PartitionedFile[][] files =
            new org.apache.spark.sql.execution.datasources.PartitionedFile[parts.length][];
        for (int i = 0; i < parts.length; i++) {
            if (!(parts[i] instanceof org.apache.spark.sql.execution.datasources.FilePartition)) {
                return null;
            }
            files[i] = ((org.apache.spark.sql.execution.datasources.FilePartition) parts[i]).files();
        }
        return files;
    }

    /** The number of records in each partition of a Dataset that is a scan of Parquet
     *  files under projections, comma-separated: counted from the files' footers, of each
     *  part of a file the row groups Spark's Parquet reader picks for its byte range (see
     *  {@link #rowGroups}), without a job.  Null for another plan, a scan that filters
     *  (its row groups may be skipped by their statistics) or a partition not of files.
     *  A footer that cannot be read raises: Spark's own count then says what it does
     *  with that file. */
    public String partitionRows(org.apache.spark.sql.Dataset ds) throws java.io.IOException {
        org.apache.spark.sql.execution.FileSourceScanExec scan = scanOf(ds, true);
        if (scan == null || !(scan.relation().fileFormat()
                instanceof org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat)
            || scan.dataFilters().nonEmpty() || scan.partitionFilters().nonEmpty()) {
            return null;
        }
        org.apache.hadoop.conf.Configuration conf = ds.sparkSession().sessionState().newHadoopConf();
        org.apache.spark.sql.execution.datasources.PartitionedFile[][] parts = filesOf(scan);
        if (parts == null) {
            return null;
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < parts.length; i++) {
            org.apache.spark.sql.execution.datasources.PartitionedFile[] files = parts[i];
            long rows = 0;
            for (int j = 0; j < files.length; j++) {
                rows += partRows(conf, files[j]);
            }
            b.append(i == 0 ? "" : ",").append(rows);
        }
        return reply(b.toString());
    }

    /** The records of the row groups Spark's Parquet reader reads of part {@code f}. */
    private static long partRows(org.apache.hadoop.conf.Configuration conf,
            org.apache.spark.sql.execution.datasources.PartitionedFile f)
            throws java.io.IOException {
        org.apache.hadoop.fs.Path path = f.toPath();
        org.apache.parquet.ParquetReadOptions options =
            org.apache.parquet.HadoopReadOptions.builder(conf, path)
                .withRange(f.start(), f.start() + f.length()).build();
        org.apache.parquet.hadoop.ParquetFileReader reader =
            new org.apache.parquet.hadoop.ParquetFileReader(
                org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(path, conf), options);
        try {
            long rows = 0;
            java.util.List groups = reader.getRowGroups();
            for (int k = 0; k < groups.size(); k++) {
                rows += ((org.apache.parquet.hadoop.metadata.BlockMetaData) groups.get(k))
                    .getRowCount();
            }
            return rows;
        } finally {
            reader.close();
        }
    }

    /** The ordinal and starting position of each row group of a part of a Parquet file,
     *  as Spark's Parquet reader picks them: parquet-mr's reader given the part's byte range (a row group
     *  whose middle lies in the range). */
    private static void rowGroups(StringBuilder b, org.apache.spark.sql.SparkSession session,
            org.apache.spark.sql.execution.datasources.PartitionedFile f)
            throws java.io.IOException {
        org.apache.hadoop.conf.Configuration conf = session.sessionState().newHadoopConf();
        org.apache.hadoop.fs.Path path = f.toPath();
        org.apache.parquet.ParquetReadOptions options =
            org.apache.parquet.HadoopReadOptions.builder(conf, path)
                .withRange(f.start(), f.start() + f.length()).build();
        org.apache.parquet.hadoop.ParquetFileReader reader =
            new org.apache.parquet.hadoop.ParquetFileReader(
                org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(path, conf), options);
        try {
            java.util.List groups = reader.getRowGroups();
            for (int k = 0; k < groups.size(); k++) {
                org.apache.parquet.hadoop.metadata.BlockMetaData group =
                    (org.apache.parquet.hadoop.metadata.BlockMetaData) groups.get(k);
                if (group.getOrdinal() < 0) {
                    throw new java.io.IOException("a row group without its ordinal");
                }
                // its starting position too: Python checks the ordinal names that group
                b.append(k == 0 ? "" : ",").append(group.getOrdinal()).append(':')
                    .append(group.getStartingPos());
            }
        } finally {
            reader.close();
        }
    }

    /** Whether an expression of {@code plan} or of its subtree holds a subquery other
     *  than an uncorrelated scalar one.  Spark computes such a subquery's value before
     *  the query and reads it as a constant, the records' order kept; any other becomes
     *  a join (an existence join for {@code IN} in a projection), which need not keep it. */
    public boolean reorderingSubquery(LogicalPlan plan) {
        if (!((TreePatternBits) plan).containsPattern(planExpression)) {
            return false;
        }
        java.util.ArrayDeque nodes = new java.util.ArrayDeque();
        nodes.push(plan);
        while (!nodes.isEmpty()) {
            LogicalPlan node = (LogicalPlan) nodes.pop();
            java.util.ArrayDeque exprs = new java.util.ArrayDeque();
            scala.collection.Iterator it = node.expressions().iterator();
            while (it.hasNext()) {
                exprs.push(it.next());
            }
            while (!exprs.isEmpty()) {
                Expression e = (Expression) exprs.pop();
                if (!((TreePatternBits) e).containsPattern(planExpression)) {
                    continue;
                }
                if (e instanceof org.apache.spark.sql.catalyst.expressions.ScalarSubquery) {
                    if (((org.apache.spark.sql.catalyst.expressions.ScalarSubquery) e)
                            .outerAttrs().isEmpty()) {
                        continue;  // (its plan is not among its children)
                    }
                    return true;
                }
                if (e instanceof org.apache.spark.sql.catalyst.expressions.PlanExpression) {
                    return true;
                }
                scala.collection.Iterator kids = e.children().iterator();
                while (kids.hasNext()) {
                    exprs.push(kids.next());
                }
            }
            scala.collection.Iterator kids = node.children().iterator();
            while (kids.hasNext()) {
                nodes.push(kids.next());
            }
        }
        return false;
    }

    /** Child {@code i} of a plan node. */
    public LogicalPlan child(LogicalPlan node, int i) {
        return (LogicalPlan) node.children().apply(i);
    }
}
