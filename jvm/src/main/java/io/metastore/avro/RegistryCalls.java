package io.metastore.avro;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The two Schema Registry calls a record codec makes, on any Confluent-compatible registry: the
 * schema of an id (a reader meeting a record's schema id) and the id of a schema under a subject
 * (a writer registering its schema, as Confluent's serializers do with auto-registration). Both
 * are cached for the life of the JVM: a schema id never changes its schema, and registering the
 * same schema again under a subject yields the same id.
 *
 * <p>The registry's base URL may carry {@code user:password@}, sent as basic authentication and
 * never shown in a message.
 */
public final class RegistryCalls {
    /** The Spark configuration that names the registry of a session and its executors. */
    public static final String URL_CONF = "spark.metastore.schemaRegistry.url";
    /** Its credentials ({@code user:password}), apart: a key Spark's redaction hides. */
    public static final String USER_INFO_CONF = "spark.metastore.schemaRegistry.password";

    /** The registry did not answer, or failed (a 5xx): nothing is known about what was asked. */
    public static final class UnavailableException extends IllegalStateException {
        UnavailableException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** A registration the registry refused because another one was creating the subject at the
     * same moment (Apicurio's Confluent API answers 409 "already exists" to the later of two
     * first registrations): registering again finds the subject. Registrations of one JVM to one
     * registry are sent one at a time ({@link #REGISTERING}): Apicurio's in-memory database
     * fails writers that wait for each other. */
    static final class ConcurrentCreationException extends IllegalStateException {
        ConcurrentCreationException(String message) {
            super(message);
        }
    }

    private static final int REGISTER_ATTEMPTS = 5;
    private static final Map<String, Object> REGISTERING = new ConcurrentHashMap<>();
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final HttpClient CLIENT = HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(10)).build();
    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final String CONTENT_TYPE = "application/vnd.schemaregistry.v1+json";
    private static final Map<String, String> SCHEMAS = new ConcurrentHashMap<>();
    private static final Map<String, Integer> IDS = new ConcurrentHashMap<>();
    private static final java.util.Set<String> MISSING = ConcurrentHashMap.newKeySet();

    private RegistryCalls() {
    }

    /** The registry of this JVM's Spark session, from {@link #URL_CONF}. */
    public static String sessionUrl() {
        String url = null;
        String userInfo = null;
        org.apache.spark.SparkEnv env = org.apache.spark.SparkEnv.get();
        if (env != null) {
            url = env.conf().get(URL_CONF, null);
            userInfo = env.conf().get(USER_INFO_CONF, null);
        }
        if (url == null || url.isBlank()) {
            throw new IllegalStateException("no Schema Registry is configured for this Spark "
                    + "session (" + URL_CONF + "); start the node with --schema-registry-url");
        }
        if (userInfo != null && !userInfo.isEmpty()) {
            int scheme = url.indexOf("://");
            if (scheme > 0) {
                url = url.substring(0, scheme + 3) + userInfo + "@" + url.substring(scheme + 3);
            }
        }
        return url;
    }

    /** The schema text of {@code id}; an {@link IllegalArgumentException} when the registry
     * does not know it (remembered: a record of an unknown id does not ask again). */
    public static String schemaOf(String url, int id) {
        String key = url + "\n" + id;
        if (MISSING.contains(key)) {
            throw new IllegalArgumentException("the Schema Registry has no schema " + id);
        }
        try {
            return SCHEMAS.computeIfAbsent(key, ignored -> {
                JsonNode answer = call(url, "GET", "/schemas/ids/" + id, null);
                return answer.path("schema").asText();
            });
        } catch (IllegalArgumentException e) {
            MISSING.add(key);
            throw e;
        }
    }

    /** The id of {@code schema} (of {@code schemaType}: AVRO, PROTOBUF or JSON) under
     * {@code subject}, registered there if it is not yet. */
    public static int register(String url, String subject, String schemaType, String schema) {
        return register(url, subject, schemaType, schema, null);
    }

    /** {@link #register} of a schema that references others: {@code referencesJson} is the
     * registry's JSON list of their {@code name}, {@code subject} and {@code version} (null or
     * {@code []} for none), each registered already. */
    public static int register(String url, String subject, String schemaType, String schema,
                               String referencesJson) {
        String references = referencesJson == null || referencesJson.isBlank()
                ? "[]" : referencesJson;
        return IDS.computeIfAbsent(url + "\n" + subject + "\n" + schemaType + "\n" + schema
                        + "\n" + references,
                ignored -> {
                    ObjectNode body = MAPPER.createObjectNode();
                    body.put("schema", schema);
                    if (!"AVRO".equals(schemaType)) {
                        body.put("schemaType", schemaType);
                    }
                    if (!"[]".equals(references)) {
                        try {
                            body.set("references", MAPPER.readTree(references));
                        } catch (IOException e) {
                            throw new IllegalArgumentException("not a JSON list of references", e);
                        }
                    }
                    String path = "/subjects/" + URLEncoder.encode(subject, StandardCharsets.UTF_8)
                            .replace("+", "%20") + "/versions";
                    JsonNode answer = registerOnce(url, path, body.toString());
                    if (!answer.path("id").canConvertToInt()) {
                        throw new IllegalStateException("the Schema Registry answered no id for "
                                + subject);
                    }
                    SCHEMAS.putIfAbsent(url + "\n" + answer.path("id").asInt(), schema);
                    return answer.path("id").asInt();
                });
    }

    /** Confluent's wire-format header (a zero magic byte, the 4-byte id) of {@code schema}
     * under {@code subject}, registered there if it is not yet, in base64: what a JSON_SR
     * record's JSON follows. */
    public static String header(String schemaType, String subject, String schema) {
        return headerWith(sessionUrl(), schemaType, subject, schema);
    }

    /** {@link #header} on the registry at {@code url}. */
    public static String headerWith(String url, String schemaType, String subject, String schema) {
        return headerWith(url, schemaType, subject, schema, null);
    }

    /** {@link #headerWith} of a schema that references others (see {@link #register}). */
    public static String headerWith(String url, String schemaType, String subject, String schema,
                                    String referencesJson) {
        int id = register(url, subject, schemaType, schema, referencesJson);
        byte[] header = java.nio.ByteBuffer.allocate(5).put((byte) 0).putInt(id).array();
        return Base64.getEncoder().encodeToString(header);
    }

    private static JsonNode registerOnce(String url, String path, String body) {
        for (int attempt = 1; ; attempt++) {
            try {
                synchronized (REGISTERING.computeIfAbsent(url, ignored -> new Object())) {
                    return call(url, "POST", path, body);
                }
            } catch (ConcurrentCreationException | UnavailableException e) {
                // a registration is idempotent: sent again, it finds what the first one made;
                // Apicurio's database answers 500 to writers it timed out on each other's locks
                if (attempt == REGISTER_ATTEMPTS) {
                    throw e;
                }
                try {
                    Thread.sleep(200L * attempt);
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    private static JsonNode call(String url, String method, String path, String body) {
        URI base;
        try {
            base = new URI(url.endsWith("/") ? url.substring(0, url.length() - 1) : url);
        } catch (java.net.URISyntaxException e) {
            throw new IllegalStateException("not a Schema Registry URL");  // the URL not shown
        }
        String userInfo = base.getRawUserInfo();
        URI target;
        try {
            target = new URI(base.getScheme(), null, base.getHost(), base.getPort(),
                    null, null, null).resolve(base.getRawPath() + path);
        } catch (java.net.URISyntaxException e) {
            throw new IllegalArgumentException("not a Schema Registry URL", e);
        }
        HttpRequest.Builder request = HttpRequest.newBuilder(target).timeout(TIMEOUT)
                .header("Accept", CONTENT_TYPE);
        if (userInfo != null) {
            String decoded = java.net.URLDecoder.decode(userInfo, StandardCharsets.UTF_8);
            request.header("Authorization", "Basic " + Base64.getEncoder()
                    .encodeToString(decoded.getBytes(StandardCharsets.UTF_8)));
        }
        if (body == null) {
            request.GET();
        } else {
            request.header("Content-Type", CONTENT_TYPE)
                    .method(method, HttpRequest.BodyPublishers.ofString(body));
        }
        HttpResponse<String> response;
        try {
            response = CLIENT.send(request.build(), HttpResponse.BodyHandlers.ofString());
        } catch (IOException e) {
            throw new UnavailableException("the Schema Registry at " + target
                    + " did not answer: " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while calling the Schema Registry", e);
        }
        if (response.statusCode() / 100 != 2) {
            String text = response.body();
            String message = "the Schema Registry answered " + response.statusCode() + " to "
                    + method + " " + target.getPath() + ": "
                    + (text.length() > 500 ? text.substring(0, 500) : text);
            if (response.statusCode() == 404 && "GET".equals(method)) {
                throw new IllegalArgumentException(message);
            }
            if (response.statusCode() >= 500) {
                throw new UnavailableException(message, null);
            }
            if (response.statusCode() == 409 && text.contains("already exists")) {
                throw new ConcurrentCreationException(message);
            }
            throw new IllegalStateException(message);
        }
        try {
            return MAPPER.readTree(response.body());
        } catch (IOException e) {
            throw new IllegalStateException("the Schema Registry answered no JSON", e);
        }
    }
}
