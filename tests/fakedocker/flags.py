"""Per NGC tag, the long options the tag's own tritonserver and perf_analyzer accept: the test docker refuses any
other, as the binaries do ("unrecognized option"). Test infrastructure, read from the release sources on 2026-12-04
(each entry says where); an unrecorded tag gets the newest recorded tag at or before it.

tritonserver: the `{OPTION_..., "name", ...}` entries of src/command_line_parser.cc in triton-inference-server/server
at the release's tag (24.05 = v2.46.0, 24.10 = v2.51.0, 25.01 = v2.54.0, 26.02 = v2.66.0: the server version of each
release, as in the release notes).
perf_analyzer: the getopt_long `long_options` table of command_line_parser.cc (short options: the getopt string
"vdazc:u:m:x:b:t:p:i:H:l:r:s:f:", the same in every source read).
"""
from __future__ import annotations

PERF_ANALYZER_SHORT = {"-v": False, "-d": False, "-a": False, "-z": False, "-c": True, "-u": True, "-m": True,
                       "-x": True, "-b": True, "-t": True, "-p": True, "-i": True, "-H": True, "-l": True, "-r": True,
                       "-s": True, "-f": True}

TRITONSERVER = {
    # 24.05: triton-inference-server/server v2.46.0, src/command_line_parser.cc
    "24.05": frozenset({
        "allow-cpu-metrics", "allow-gpu-metrics", "allow-grpc", "allow-http", "allow-metrics", "allow-sagemaker",
        "allow-vertex-ai", "backend-config", "backend-directory", "buffer-manager-thread-count", "cache-config",
        "cache-directory", "cuda-memory-pool-byte-size", "cuda-virtual-address-size", "disable-auto-complete-config",
        "exit-on-error", "exit-timeout-secs", "grpc-address", "grpc-header-forward-pattern",
        "grpc-http2-max-ping-strikes", "grpc-http2-max-pings-without-data",
        "grpc-http2-min-recv-ping-interval-without-data", "grpc-infer-allocation-pool-size",
        "grpc-infer-response-compression-level", "grpc-keepalive-permit-without-calls", "grpc-keepalive-time",
        "grpc-keepalive-timeout", "grpc-max-connection-age", "grpc-max-connection-age-grace", "grpc-port",
        "grpc-restricted-protocol", "grpc-root-cert", "grpc-server-cert", "grpc-server-key", "grpc-use-ssl",
        "grpc-use-ssl-mutual", "help", "host-policy", "http-address", "http-header-forward-pattern", "http-port",
        "http-restricted-api", "http-thread-count", "id", "load-model", "log-error", "log-file", "log-format",
        "log-info", "log-verbose", "log-warning", "metrics-address", "metrics-config", "metrics-interval-ms",
        "metrics-port", "min-supported-compute-capability", "model-config-name", "model-control-mode",
        "model-load-gpu-limit", "model-load-retry-count", "model-load-thread-count", "model-namespacing",
        "model-repository", "model-store", "pinned-memory-pool-byte-size", "rate-limit", "rate-limit-resource",
        "repoagent-directory", "repository-poll-secs", "response-cache-byte-size", "reuse-grpc-port",
        "reuse-http-port", "sagemaker-port", "sagemaker-safe-port-range", "sagemaker-thread-count",
        "strict-model-config", "strict-readiness", "trace-config", "trace-count", "trace-file", "trace-level",
        "trace-log-frequency", "trace-rate", "vertex-ai-default-model", "vertex-ai-port", "vertex-ai-thread-count",
    }),
    # 24.10: triton-inference-server/server v2.51.0, src/command_line_parser.cc
    "24.10": frozenset({
        "allow-cpu-metrics", "allow-gpu-metrics", "allow-grpc", "allow-http", "allow-metrics", "allow-sagemaker",
        "allow-vertex-ai", "backend-config", "backend-directory", "buffer-manager-thread-count", "cache-config",
        "cache-directory", "cuda-memory-pool-byte-size", "cuda-virtual-address-size", "disable-auto-complete-config",
        "enable-peer-access", "exit-on-error", "exit-timeout-secs", "grpc-address", "grpc-header-forward-pattern",
        "grpc-http2-max-ping-strikes", "grpc-http2-max-pings-without-data",
        "grpc-http2-min-recv-ping-interval-without-data", "grpc-infer-allocation-pool-size",
        "grpc-infer-response-compression-level", "grpc-keepalive-permit-without-calls", "grpc-keepalive-time",
        "grpc-keepalive-timeout", "grpc-max-connection-age", "grpc-max-connection-age-grace", "grpc-port",
        "grpc-restricted-protocol", "grpc-root-cert", "grpc-server-cert", "grpc-server-key", "grpc-use-ssl",
        "grpc-use-ssl-mutual", "help", "host-policy", "http-address", "http-header-forward-pattern", "http-port",
        "http-restricted-api", "http-thread-count", "id", "load-model", "log-error", "log-file", "log-format",
        "log-info", "log-verbose", "log-warning", "metrics-address", "metrics-config", "metrics-interval-ms",
        "metrics-port", "min-supported-compute-capability", "model-config-name", "model-control-mode",
        "model-load-gpu-limit", "model-load-retry-count", "model-load-thread-count", "model-namespacing",
        "model-repository", "model-store", "pinned-memory-pool-byte-size", "rate-limit", "rate-limit-resource",
        "repoagent-directory", "repository-poll-secs", "response-cache-byte-size", "reuse-grpc-port",
        "reuse-http-port", "sagemaker-port", "sagemaker-safe-port-range", "sagemaker-thread-count",
        "strict-model-config", "strict-readiness", "trace-config", "trace-count", "trace-file", "trace-level",
        "trace-log-frequency", "trace-rate", "vertex-ai-default-model", "vertex-ai-port", "vertex-ai-thread-count",
    }),
    # 25.01: triton-inference-server/server v2.54.0, src/command_line_parser.cc
    "25.01": frozenset({
        "allow-cpu-metrics", "allow-gpu-metrics", "allow-grpc", "allow-http", "allow-metrics", "allow-sagemaker",
        "allow-vertex-ai", "backend-config", "backend-directory", "buffer-manager-thread-count", "cache-config",
        "cache-directory", "cuda-memory-pool-byte-size", "cuda-virtual-address-size", "disable-auto-complete-config",
        "enable-peer-access", "exit-on-error", "exit-timeout-secs", "grpc-address", "grpc-header-forward-pattern",
        "grpc-http2-max-ping-strikes", "grpc-http2-max-pings-without-data",
        "grpc-http2-min-recv-ping-interval-without-data", "grpc-infer-allocation-pool-size",
        "grpc-infer-response-compression-level", "grpc-keepalive-permit-without-calls", "grpc-keepalive-time",
        "grpc-keepalive-timeout", "grpc-max-connection-age", "grpc-max-connection-age-grace", "grpc-port",
        "grpc-restricted-protocol", "grpc-root-cert", "grpc-server-cert", "grpc-server-key", "grpc-use-ssl",
        "grpc-use-ssl-mutual", "help", "host-policy", "http-address", "http-header-forward-pattern", "http-port",
        "http-restricted-api", "http-thread-count", "id", "load-model", "log-error", "log-file", "log-format",
        "log-info", "log-verbose", "log-warning", "metrics-address", "metrics-config", "metrics-interval-ms",
        "metrics-port", "min-supported-compute-capability", "model-config-name", "model-control-mode",
        "model-load-gpu-limit", "model-load-retry-count", "model-load-thread-count", "model-namespacing",
        "model-repository", "model-store", "pinned-memory-pool-byte-size", "rate-limit", "rate-limit-resource",
        "repoagent-directory", "repository-poll-secs", "response-cache-byte-size", "reuse-grpc-port",
        "reuse-http-port", "sagemaker-port", "sagemaker-safe-port-range", "sagemaker-thread-count",
        "strict-model-config", "strict-readiness", "trace-config", "trace-count", "trace-file", "trace-level",
        "trace-log-frequency", "trace-rate", "vertex-ai-default-model", "vertex-ai-port", "vertex-ai-thread-count",
    }),
    # 26.02: triton-inference-server/server v2.66.0, src/command_line_parser.cc
    "26.02": frozenset({
        "allow-cpu-metrics", "allow-gpu-metrics", "allow-grpc", "allow-http", "allow-metrics", "allow-sagemaker",
        "allow-vertex-ai", "backend-config", "backend-directory", "buffer-manager-thread-count", "cache-config",
        "cache-directory", "cuda-memory-pool-byte-size", "cuda-virtual-address-size", "disable-auto-complete-config",
        "enable-peer-access", "exit-on-error", "exit-timeout-secs", "grpc-address", "grpc-header-forward-pattern",
        "grpc-http2-max-ping-strikes", "grpc-http2-max-pings-without-data",
        "grpc-http2-min-recv-ping-interval-without-data", "grpc-infer-allocation-pool-size",
        "grpc-infer-response-compression-level", "grpc-infer-thread-count", "grpc-keepalive-permit-without-calls",
        "grpc-keepalive-time", "grpc-keepalive-timeout", "grpc-max-connection-age", "grpc-max-connection-age-grace",
        "grpc-max-response-pool-size", "grpc-port", "grpc-restricted-protocol", "grpc-root-cert", "grpc-server-cert",
        "grpc-server-key", "grpc-use-ssl", "grpc-use-ssl-mutual", "help", "host-policy", "http-address",
        "http-header-forward-pattern", "http-max-input-size", "http-port", "http-restricted-api",
        "http-thread-count", "id", "load-model", "log-error", "log-file", "log-format", "log-info", "log-verbose",
        "log-warning", "metrics-address", "metrics-config", "metrics-interval-ms", "metrics-port",
        "min-supported-compute-capability", "model-config-name", "model-control-mode", "model-load-gpu-limit",
        "model-load-retry-count", "model-load-thread-count", "model-namespacing", "model-repository", "model-store",
        "pinned-memory-pool-byte-size", "rate-limit", "rate-limit-resource", "repoagent-directory",
        "repository-poll-secs", "response-cache-byte-size", "reuse-grpc-port", "reuse-http-port", "sagemaker-port",
        "sagemaker-safe-port-range", "sagemaker-thread-count", "strict-model-config", "strict-readiness",
        "trace-config", "trace-count", "trace-file", "trace-level", "trace-log-frequency", "trace-rate",
        "vertex-ai-default-model", "vertex-ai-port", "vertex-ai-thread-count",
    }),
}
PERF_ANALYZER = {
    # 24.05: triton-inference-server/client branch r24.05, src/c++/perf_analyzer/command_line_parser.cc
    "24.05": frozenset({
        "async", "binary-search", "bls-composing-models", "collect-metrics", "concurrency-range", "data-directory",
        "enable-mpi", "endpoint", "grpc-compression-algorithm", "input-data", "input-tensor-format",
        "latency-threshold", "log-frequency", "max-threads", "max-trials", "measurement-interval",
        "measurement-mode", "measurement-request-count", "metrics-interval", "metrics-url", "model-repository",
        "model-signature-name", "num-of-sequences", "output-shared-memory-size", "output-tensor-format",
        "percentile", "periodic-concurrency-range", "profile-export-file", "request-count", "request-distribution",
        "request-intervals", "request-parameter", "request-period", "request-rate-range", "sequence-id-range",
        "sequence-length", "sequence-length-variation", "serial-sequences", "service-kind", "shape", "shared-memory",
        "ssl-grpc-certificate-chain-file", "ssl-grpc-private-key-file", "ssl-grpc-root-certifications-file",
        "ssl-grpc-use-ssl", "ssl-https-ca-certificates-file", "ssl-https-client-certificate-file",
        "ssl-https-client-certificate-type", "ssl-https-private-key-file", "ssl-https-private-key-type",
        "ssl-https-verify-host", "ssl-https-verify-peer", "stability-percentage", "streaming", "string-data",
        "string-length", "sync", "trace-count", "trace-level", "trace-rate", "triton-server-directory",
        "verbose-csv", "version",
    }),
    # 24.10: triton-inference-server/perf_analyzer branch r24.10, src/command_line_parser.cc
    "24.10": frozenset({
        "async", "binary-search", "bls-composing-models", "collect-metrics", "concurrency-range", "data-directory",
        "enable-mpi", "endpoint", "grpc-compression-algorithm", "input-data", "input-tensor-format",
        "latency-threshold", "log-frequency", "max-threads", "max-trials", "measurement-interval",
        "measurement-mode", "measurement-request-count", "metrics-interval", "metrics-url", "model-repository",
        "model-signature-name", "num-of-sequences", "output-shared-memory-size", "output-tensor-format",
        "percentile", "periodic-concurrency-range", "profile-export-file", "request-count", "request-distribution",
        "request-intervals", "request-parameter", "request-period", "request-rate-range", "sequence-id-range",
        "sequence-length", "sequence-length-variation", "serial-sequences", "service-kind", "shape", "shared-memory",
        "ssl-grpc-certificate-chain-file", "ssl-grpc-private-key-file", "ssl-grpc-root-certifications-file",
        "ssl-grpc-use-ssl", "ssl-https-ca-certificates-file", "ssl-https-client-certificate-file",
        "ssl-https-client-certificate-type", "ssl-https-private-key-file", "ssl-https-private-key-type",
        "ssl-https-verify-host", "ssl-https-verify-peer", "stability-percentage", "streaming", "string-data",
        "string-length", "sync", "trace-count", "trace-level", "trace-rate", "triton-server-directory",
        "verbose-csv", "version", "warmup-request-count",
    }),
    # 25.01: triton-inference-server/perf_analyzer branch r25.01, src/command_line_parser.cc
    "25.01": frozenset({
        "async", "binary-search", "bls-composing-models", "collect-metrics", "concurrency-range", "data-directory",
        "enable-mpi", "endpoint", "grpc-compression-algorithm", "input-data", "input-tensor-format",
        "latency-threshold", "log-frequency", "max-threads", "max-trials", "measurement-interval",
        "measurement-mode", "measurement-request-count", "metrics-interval", "metrics-url", "model-repository",
        "model-signature-name", "num-of-sequences", "output-shared-memory-size", "output-tensor-format",
        "percentile", "periodic-concurrency-range", "profile-export-file", "request-count", "request-distribution",
        "request-intervals", "request-parameter", "request-period", "request-rate-range", "schedule",
        "sequence-id-range", "sequence-length", "sequence-length-variation", "serial-sequences", "service-kind",
        "shape", "shared-memory", "ssl-grpc-certificate-chain-file", "ssl-grpc-private-key-file",
        "ssl-grpc-root-certifications-file", "ssl-grpc-use-ssl", "ssl-https-ca-certificates-file",
        "ssl-https-client-certificate-file", "ssl-https-client-certificate-type", "ssl-https-private-key-file",
        "ssl-https-private-key-type", "ssl-https-verify-host", "ssl-https-verify-peer", "stability-percentage",
        "streaming", "string-data", "string-length", "sync", "trace-count", "trace-level", "trace-rate",
        "triton-server-directory", "verbose-csv", "version", "warmup-request-count",
    }),
    # 26.02: triton-inference-server/perf_analyzer main at 263c5f6e (2025-12-15; no r26.02 branch in the mirror read, and r25.12's table is the same), src/command_line_parser.cc
    "26.02": frozenset({
        "async", "binary-search", "bls-composing-models", "collect-metrics", "concurrency-range", "data-directory",
        "enable-mpi", "endpoint", "fixed-schedule", "grpc-compression-algorithm", "grpc-method", "input-data",
        "input-tensor-format", "latency-threshold", "log-frequency", "max-threads", "max-trials",
        "measurement-interval", "measurement-mode", "measurement-request-count", "metrics-interval", "metrics-url",
        "model-repository", "model-signature-name", "num-of-sequences", "output-shared-memory-size",
        "output-tensor-format", "percentile", "periodic-concurrency-range", "profile-export-file", "request-count",
        "request-distribution", "request-intervals", "request-parameter", "request-period", "request-rate-range",
        "sequence-id-range", "sequence-length", "sequence-length-variation", "serial-sequences", "service-kind",
        "session-concurrency", "shape", "shared-memory", "ssl-grpc-certificate-chain-file",
        "ssl-grpc-private-key-file", "ssl-grpc-root-certifications-file", "ssl-grpc-use-ssl",
        "ssl-https-ca-certificates-file", "ssl-https-client-certificate-file", "ssl-https-client-certificate-type",
        "ssl-https-private-key-file", "ssl-https-private-key-type", "ssl-https-verify-host", "ssl-https-verify-peer",
        "stability-percentage", "streaming", "string-data", "string-length", "sync", "trace-count", "trace-level",
        "trace-rate", "triton-server-directory", "verbose-csv", "version", "warmup-request-count",
    }),
}


def table_for(tag: str, table: dict[str, frozenset[str]]) -> tuple[str, frozenset[str]]:
    """The recorded tag whose options stand for `tag` (itself, else the newest recorded one at or before it, else
    the oldest) and those options."""
    older = [t for t in sorted(table) if t <= tag]
    chosen = older[-1] if older else min(table)
    return chosen, table[chosen]


def unknown_options(program: str, tag: str, args: list[str]) -> list[str]:
    """The options in `args` that `program` ("tritonserver" or "perf_analyzer") of NGC `tag` does not have."""
    _, names = table_for(tag, TRITONSERVER if program == "tritonserver" else PERF_ANALYZER)
    found = []
    for arg in args:
        if arg.startswith("--"):
            if arg[2:].partition("=")[0] not in names:
                found.append(arg.partition("=")[0])
        elif program == "perf_analyzer" and arg.startswith("-") and len(arg) >= 2 and not arg[1].isdigit():
            if arg[:2] not in PERF_ANALYZER_SHORT:
                found.append(arg[:2])
    return found

