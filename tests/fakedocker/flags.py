"""Per NGC tag, the long options the tag's own tritonserver and perf_analyzer accept: the test docker refuses any
other, as the binaries do ("unrecognized option"). Test infrastructure, read from the release sources on 2026-12-04
(each entry says where); an unrecorded tag gets the newest recorded tag at or before it.

tritonserver: the `{OPTION_..., "name", ...}` entries of src/command_line_parser.cc in triton-inference-server/server
at the release's tag (24.05 = v2.46.0, 24.10 = v2.51.0, 25.01 = v2.54.0, 26.02 = v2.66.0: the server version of each
release, as in the release notes).
perf_analyzer: the getopt_long `long_options` table of command_line_parser.cc (short options: the getopt string
"vdazc:u:m:x:b:t:p:i:H:l:r:s:f:", the same in every source read).
trtexec (per TensorRT release) and Model Analyzer (its YAML keys and `profile` flags, per tag): at TRTEXEC and
MODEL_ANALYZER_YAML below.
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
}
# 24.10: triton-inference-server/server v2.51.0, src/command_line_parser.cc: what changed since 24.05
TRITONSERVER["24.10"] = TRITONSERVER["24.05"] | {"enable-peer-access"}
# 25.01: triton-inference-server/server v2.54.0, src/command_line_parser.cc: the same options as 24.10
TRITONSERVER["25.01"] = TRITONSERVER["24.10"]
# 26.02: triton-inference-server/server v2.66.0, src/command_line_parser.cc: what changed since 25.01
TRITONSERVER["26.02"] = TRITONSERVER["25.01"] | {
    "grpc-infer-thread-count", "grpc-max-response-pool-size", "http-max-input-size",
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
}
# 24.10: triton-inference-server/perf_analyzer branch r24.10, src/command_line_parser.cc: what changed since 24.05
PERF_ANALYZER["24.10"] = PERF_ANALYZER["24.05"] | {"warmup-request-count"}
# 25.01: triton-inference-server/perf_analyzer branch r25.01, src/command_line_parser.cc: the same options as 24.10
PERF_ANALYZER["25.01"] = PERF_ANALYZER["24.10"] | {"schedule"}
# 26.02: triton-inference-server/perf_analyzer main at 263c5f6e (2025-12-15; no r26.02 branch in the mirror read, and r25.12's table is the same), src/command_line_parser.cc: what changed since 25.01
PERF_ANALYZER["26.02"] = (PERF_ANALYZER["25.01"] - {"schedule"}) | {
    "fixed-schedule", "grpc-method", "session-concurrency",
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



# trtexec's long options per TensorRT release (the first (major, minor) a table holds for): the option names that
# samples/common/sampleOptions.cpp of NVIDIA/TensorRT parses (`getAndDelOption(arguments, "--name", ...)` and the
# like) at the release's tag; read 2026-12-03. 24.05 ships 10.0.1, 24.10 10.5.0, 25.01 10.8.0 (helpers/ngc.py); 26.02's
# is not recorded, so its commands are checked against every TensorRT 10 table from 25.01's on (trtexec_tables_for).
TRTEXEC = {
    # 10.0: NVIDIA/TensorRT tag v10.0.1, samples/common/sampleOptions.cpp
    "10.0": frozenset({
        "allocationStrategy", "allowGPUFallback", "allowWeightStreaming", "avgRuns", "avgTiming", "best", "bf16",
        "buildDLAStandalone", "builderOptimizationLevel", "calib", "calibProfile", "consistency", "device",
        "directIO", "dumpLayerInfo", "dumpOptimizationProfile", "dumpOutput", "dumpProfile",
        "dumpRawBindingsToFile", "dumpRefit", "duration", "dynamicPlugins", "errorOnTimingCacheMiss",
        "excludeLeanRuntime", "exportLayerInfo", "exportOutput", "exportProfile", "exportTimes", "exposeDMA",
        "fp16", "fp8", "getPlanVersionOnly", "hardwareCompatibilityLevel", "help", "idleTime",
        "ignoreParsedPluginLibs", "infStreams", "inputIOFormats", "int8", "iterations", "layerDeviceTypes",
        "layerOutputTypes", "layerPrecisions", "leanDLLPath", "loadEngine", "loadInputs", "markDebug",
        "maxAuxStreams", "maxShapes", "maxShapesCalib", "memPoolSize", "minShapes", "minShapesCalib",
        "noBuilderCache", "noCompilationCache", "noDataTransfers", "noTF32", "onnx", "optShapes", "optShapesCalib",
        "outputIOFormats", "percentile", "persistentCacheRatio", "pi", "pluginInstanceNorm", "plugins",
        "precisionConstraints", "preview", "profile", "profilingVerbosity", "refit", "restricted", "safe",
        "saveDebugTensors", "saveEngine", "separateProfileRun", "serialized", "setPluginsToSerialize", "shapes",
        "skipInference", "sleepTime", "sparsity", "staticPlugins", "std", "streams", "stripWeights",
        "stronglyTyped", "tacticSources", "tempdir", "tempfileControls", "threads", "timeDeserialize", "timeRefit",
        "timingCacheFile", "useCudaGraph", "useDLACore", "useManagedMemory", "useProfile", "useRuntime",
        "useSpinWait", "vc", "verbose", "versionCompatible", "warmUp", "weightStreamingBudget", "weightless",
    }),
    # 10.5: NVIDIA/TensorRT tag v10.5.0, samples/common/sampleOptions.cpp
    "10.5": frozenset({
        "allocationStrategy", "allowGPUFallback", "allowWeightStreaming", "avgRuns", "avgTiming", "best", "bf16",
        "buildDLAStandalone", "builderOptimizationLevel", "calib", "calibProfile", "device", "directIO",
        "dumpLayerInfo", "dumpOptimizationProfile", "dumpOutput", "dumpProfile", "dumpRawBindingsToFile",
        "dumpRefit", "duration", "dynamicPlugins", "errorOnTimingCacheMiss", "excludeLeanRuntime",
        "exportLayerInfo", "exportOutput", "exportProfile", "exportTimes", "exposeDMA", "fp16", "fp8",
        "getPlanVersionOnly", "hardwareCompatibilityLevel", "help", "idleTime", "ignoreParsedPluginLibs",
        "infStreams", "inputIOFormats", "int4", "int8", "iterations", "layerDeviceTypes", "layerOutputTypes",
        "layerPrecisions", "leanDLLPath", "loadEngine", "loadInputs", "markDebug", "maxAuxStreams", "maxShapes",
        "maxShapesCalib", "maxTactics", "memPoolSize", "minShapes", "minShapesCalib", "noBuilderCache",
        "noCompilationCache", "noDataTransfers", "noTF32", "onnx", "optShapes", "optShapesCalib", "outputIOFormats",
        "percentile", "persistentCacheRatio", "pi", "pluginInstanceNorm", "plugins", "precisionConstraints",
        "preview", "profile", "profilingVerbosity", "refit", "restricted", "runtimePlatform", "safe",
        "saveDebugTensors", "saveEngine", "separateProfileRun", "serialized", "setPluginsToSerialize", "shapes",
        "skipInference", "sleepTime", "sparsity", "staticPlugins", "std", "streams", "stripAllWeights",
        "stripWeights", "stronglyTyped", "tacticSources", "tempdir", "tempfileControls", "threads",
        "timeDeserialize", "timeRefit", "timingCacheFile", "useCudaGraph", "useDLACore", "useManagedMemory",
        "useProfile", "useRuntime", "useSpinWait", "vc", "verbose", "versionCompatible", "warmUp",
        "weightStreamingBudget", "weightless",
    }),
    # 10.8: NVIDIA/TensorRT tag v10.8.0, samples/common/sampleOptions.cpp
    "10.8": frozenset({
        "allocationStrategy", "allowGPUFallback", "allowWeightStreaming", "asyncFileReader", "avgRuns", "avgTiming",
        "best", "bf16", "buildDLAStandalone", "builderOptimizationLevel", "calib", "calibProfile", "device",
        "directIO", "dumpLayerInfo", "dumpOptimizationProfile", "dumpOutput", "dumpProfile",
        "dumpRawBindingsToFile", "dumpRefit", "duration", "dynamicPlugins", "errorOnTimingCacheMiss",
        "excludeLeanRuntime", "exportLayerInfo", "exportOutput", "exportProfile", "exportTimes", "exposeDMA",
        "fp16", "fp8", "getPlanVersionOnly", "hardwareCompatibilityLevel", "help", "idleTime",
        "ignoreParsedPluginLibs", "infStreams", "inputIOFormats", "int4", "int8", "iterations", "l2LimitForTiling",
        "layerDeviceTypes", "layerOutputTypes", "layerPrecisions", "leanDLLPath", "loadEngine", "loadInputs",
        "markDebug", "maxAuxStreams", "maxShapes", "maxShapesCalib", "maxTactics", "memPoolSize", "minShapes",
        "minShapesCalib", "monitorMemory", "noBuilderCache", "noCompilationCache", "noDataTransfers", "noTF32",
        "onnx", "optShapes", "optShapesCalib", "outputIOFormats", "percentile", "persistentCacheRatio", "pi",
        "pluginInstanceNorm", "plugins", "precisionConstraints", "preview", "profile", "profilingVerbosity",
        "refit", "restricted", "runtimePlatform", "safe", "saveDebugTensors", "saveEngine", "separateProfileRun",
        "serialized", "setPluginsToSerialize", "shapes", "skipInference", "sleepTime", "sparsity", "staticPlugins",
        "std", "streams", "stripAllWeights", "stripWeights", "stronglyTyped", "tacticSources", "tempdir",
        "tempfileControls", "threads", "tilingOptimizationLevel", "timeDeserialize", "timeRefit", "timingCacheFile",
        "useCudaGraph", "useDLACore", "useManagedMemory", "useProfile", "useRuntime", "useSpinWait", "vc",
        "verbose", "versionCompatible", "warmUp", "weightStreamingBudget", "weightless",
    }),
    # 10.16: NVIDIA/TensorRT tag v10.16, samples/common/sampleOptions.cpp
    "10.16": frozenset({
        "adjustForDLA", "allocationStrategy", "allowGPUFallback", "allowWeightStreaming", "asyncFileReader",
        "avgRuns", "avgTiming", "best", "bf16", "buildDLAStandalone", "builderOptimizationLevel", "calib",
        "calibProfile", "consistency", "cpuOnly", "decomposableAttentions", "device", "directIO",
        "distributiveIndependence", "dumpKernelText", "dumpLayerInfo", "dumpOptimizationProfile", "dumpOutput",
        "dumpProfile", "dumpRawBindingsToFile", "dumpRefit", "duration", "dynamicPlugins", "enablePluginOverride",
        "errorOnTimingCacheMiss", "excludeLeanRuntime", "exportLayerInfo", "exportOutput", "exportProfile",
        "exportTimes", "exposeDMA", "fp16", "fp8", "getPlanVersionOnly", "hardwareCompatibilityLevel", "help",
        "idleTime", "ignoreParsedPluginLibs", "infStreams", "inputIOFormats", "int4", "int8", "iterations",
        "l2LimitForTiling", "layerDeviceTypes", "layerOutputTypes", "layerPrecisions", "leanDLLPath", "loadEngine",
        "loadInputs", "markDebug", "markUnfusedTensorsAsDebugTensors", "maxAuxStreams", "maxShapes",
        "maxShapesCalib", "maxTactics", "memPoolSize", "minShapes", "minShapesCalib", "monitorMemory",
        "noBuilderCache", "noCompilationCache", "noDataTransfers", "noTF32", "onnx", "optShapes", "optShapesCalib",
        "outputIOFormats", "percentile", "persistentCacheRatio", "pi", "pluginInstanceNorm", "plugins",
        "precisionConstraints", "preview", "profile", "profilingVerbosity", "refit", "refitFromOnnx",
        "remoteAutoTuningConfig", "reportCapabilityDLA", "restricted", "runtimePlatform", "safe", "safetyPlugins",
        "saveAllDebugTensors", "saveDebugTensors", "saveEngine", "separateProfileRun", "serialized",
        "setPluginsToSerialize", "shapes", "skipInference", "sleepTime", "sparsity", "staticPlugins", "std",
        "streams", "stripAllWeights", "stripWeights", "stronglyTyped", "tacticSources", "tempdir",
        "tempfileControls", "threads", "tilingOptimizationLevel", "timeDeserialize", "timeRefit", "timingCacheFile",
        "uint8AsymmetricQuantizationDLA", "useCudaGraph", "useDLACore", "useManagedMemory", "useProfile",
        "useRuntime", "useSpinWait", "vc", "verbose", "versionCompatible", "warmUp", "weightStreamingBudget",
        "weightless",
    }),
    # 11.0: NVIDIA/TensorRT tag v11.0, samples/common/sampleOptions.cpp
    "11.0": frozenset({
        "adjustForDLA", "allocationStrategy", "allowGPUFallback", "allowWeightStreaming", "asyncFileReader",
        "avgRuns", "avgTiming", "buildDLAStandalone", "builderOptimizationLevel", "consistency", "cpuOnly",
        "decomposableAttentions", "device", "directIO", "distributiveIndependence", "dumpKernelText",
        "dumpLayerInfo", "dumpOptimizationProfile", "dumpOutput", "dumpProfile", "dumpRawBindingsToFile",
        "dumpRefit", "duration", "dynamicPlugins", "enablePluginOverride", "errorOnTimingCacheMiss",
        "excludeLeanRuntime", "exportLayerInfo", "exportOutput", "exportProfile", "exportTimes", "exposeDMA",
        "getPlanVersionOnly", "hardwareCompatibilityLevel", "help", "idleTime", "ignoreParsedPluginLibs",
        "includeDataTransfers", "infStreams", "inputIOFormats", "int8", "iterations", "l2LimitForTiling",
        "layerDeviceTypes", "leanDLLPath", "loadEngine", "loadInputs", "markDebug",
        "markUnfusedTensorsAsDebugTensors", "maxAuxStreams", "maxShapes", "maxTactics", "memPoolSize", "minShapes",
        "monitorMemory", "noBuilderCache", "noCompilationCache", "noCudaGraph", "noDataTransfers", "noSpinWait",
        "noTF32", "onnx", "optShapes", "outputIOFormats", "percentile", "persistentCacheRatio", "pi",
        "pluginInstanceNorm", "plugins", "preview", "profile", "profilingVerbosity", "refit", "refitFromOnnx",
        "remoteAutoTuningConfig", "reportCapabilityDLA", "runtimePlatform", "safe", "safetyPlugins",
        "saveAllDebugTensors", "saveDebugTensors", "saveEngine", "separateProfileRun", "serialized",
        "setPluginsToSerialize", "shapes", "skipInference", "sleepTime", "sparsity", "staticPlugins", "std",
        "streams", "stripAllWeights", "stripWeights", "stronglyTyped", "tacticSources", "tempdir",
        "tempfileControls", "threads", "tilingOptimizationLevel", "timeDeserialize", "timeRefit", "timingCacheFile",
        "uint8AsymmetricQuantizationDLA", "useCudaGraph", "useDLACore", "useManagedMemory", "useProfile",
        "useRuntime", "useSpinWait", "vc", "verbose", "versionCompatible", "warmUp", "weightStreamingBudget",
    }),
}

# Model Analyzer's YAML keys per NGC tag (the SDK image's Model Analyzer, branch rYY.MM of
# triton-inference-server/model_analyzer): the ConfigField names of config_command_profile.py and
# config_command_report.py, which YamlConfigValidator accepts ("X is not a valid yaml argument" otherwise); read
# 2026-12-03. dcgm_disable came with PR #952 (2024-12-20), first in r25.01.
MODEL_ANALYZER_YAML = {
    # 24.05: branch r24.05
    "24.05": frozenset({
        "always_report_gpu_metrics", "batch_sizes", "bls_composing_models", "checkpoint_directory",
        "client_max_retries", "client_protocol", "collect_cpu_metrics", "concurrency", "config_file", "constraints",
        "cpu_only_composing_models", "duration_seconds", "early_exit_enable", "export_path", "filename_model_gpu",
        "filename_model_inference", "filename_server_only", "genai_perf_flags", "gpu_output_fields", "gpus",
        "inference_output_fields", "latency_budget", "min_throughput", "model_repository", "model_type",
        "monitoring_interval", "num_configs_per_model", "num_top_model_configs", "objectives", "output_formats",
        "output_model_repository_path", "override_output_model_repository", "perf_analyzer_cpu_util",
        "perf_analyzer_flags", "perf_analyzer_max_auto_adjusts", "perf_analyzer_path", "perf_analyzer_timeout",
        "perf_output", "perf_output_path", "plots", "profile_models", "reload_model_disable",
        "report_model_configs", "request_rate", "request_rate_search_enable",
        "run_config_profile_models_concurrently_enable", "run_config_search_disable",
        "run_config_search_max_binary_search_steps", "run_config_search_max_concurrency",
        "run_config_search_max_instance_count", "run_config_search_max_model_batch_size",
        "run_config_search_max_request_rate", "run_config_search_min_concurrency",
        "run_config_search_min_instance_count", "run_config_search_min_model_batch_size",
        "run_config_search_min_request_rate", "run_config_search_mode", "server_output_fields",
        "skip_detailed_reports", "skip_summary_reports", "triton_docker_args", "triton_docker_image",
        "triton_docker_labels", "triton_docker_mounts", "triton_docker_shm_size", "triton_grpc_endpoint",
        "triton_http_endpoint", "triton_install_path", "triton_launch_mode", "triton_metrics_url",
        "triton_output_path", "triton_server_environment", "triton_server_flags", "triton_server_path", "weighting",
    }),
}
# branch r24.10: what it added
MODEL_ANALYZER_YAML["24.10"] = MODEL_ANALYZER_YAML["24.05"] | {
    "concurrency_sweep_disable", "max_percentage_of_search_space", "min_percentage_of_search_space",
    "optuna_early_exit_threshold", "optuna_max_trials", "optuna_min_trials", "use_concurrency_formula",
}
MODEL_ANALYZER_YAML["25.01"] = MODEL_ANALYZER_YAML["24.10"] | {"dcgm_disable"}  # branch r25.01: what it added
MODEL_ANALYZER_YAML["26.02"] = MODEL_ANALYZER_YAML["25.01"] | {"ensemble_composing_models"}  # branch r26.02: what it added
# `model-analyzer profile`'s command-line flags per NGC tag (the `flags=[...]` of config_command_profile.py, the same
# branches).
MODEL_ANALYZER_PROFILE = {
    # 24.05: branch r24.05
    "24.05": frozenset({
        "--always-report-gpu-metrics", "--batch-sizes", "--bls-composing-models", "--checkpoint-directory",
        "--client-max-retries", "--client-protocol", "--collect-cpu-metrics", "--concurrency", "--config-file",
        "--cpu-only-composing-models", "--duration-seconds", "--early-exit-enable", "--export-path",
        "--filename-model-gpu", "--filename-model-inference", "--filename-server-only", "--gpu-output-fields",
        "--gpus", "--inference-output-fields", "--latency-budget", "--min-throughput", "--model-repository",
        "--model-type", "--monitoring-interval", "--num-configs-per-model", "--num-top-model-configs",
        "--output-model-repository-path", "--override-output-model-repository", "--perf-analyzer-cpu-util",
        "--perf-analyzer-max-auto-adjusts", "--perf-analyzer-path", "--perf-analyzer-timeout", "--perf-output",
        "--perf-output-path", "--profile-models", "--reload-model-disable", "--request-rate",
        "--request-rate-search-enable", "--run-config-profile-models-concurrently-enable",
        "--run-config-search-disable", "--run-config-search-max-binary-search-steps",
        "--run-config-search-max-concurrency", "--run-config-search-max-instance-count",
        "--run-config-search-max-model-batch-size", "--run-config-search-max-request-rate",
        "--run-config-search-min-concurrency", "--run-config-search-min-instance-count",
        "--run-config-search-min-model-batch-size", "--run-config-search-min-request-rate",
        "--run-config-search-mode", "--server-output-fields", "--skip-detailed-reports", "--skip-summary-reports",
        "--triton-docker-image", "--triton-docker-mounts", "--triton-docker-shm-size", "--triton-grpc-endpoint",
        "--triton-http-endpoint", "--triton-install-path", "--triton-launch-mode", "--triton-metrics-url",
        "--triton-output-path", "--triton-server-path", "-b", "-c", "-d", "-e", "-f", "-i", "-m", "-r", "-s",
    }),
}
# branch r24.10: what it added
MODEL_ANALYZER_PROFILE["24.10"] = MODEL_ANALYZER_PROFILE["24.05"] | {
    "--concurrency-sweep-disable", "--max-percentage-of-search-space", "--min-percentage-of-search-space",
    "--optuna-early-exit-threshold", "--optuna-max-trials", "--optuna-min-trials", "--use-concurrency-formula",
}
MODEL_ANALYZER_PROFILE["25.01"] = MODEL_ANALYZER_PROFILE["24.10"] | {"--dcgm-disable"}  # branch r25.01: what it added
MODEL_ANALYZER_PROFILE["26.02"] = MODEL_ANALYZER_PROFILE["25.01"] | {"--ensemble-composing-models"}  # branch r26.02: what it added


def trtexec_tables_for(tensorrt: str | None) -> list[tuple[str, frozenset[str]]]:
    """The trtexec tables a command for TensorRT `tensorrt` must pass: that release's (the newest table at or before
    it), or for an unknown version every TensorRT 10 table from 10.8 (25.01's, the newest recorded before 26.02) on."""
    def key(release: str) -> tuple[int, ...]:
        return tuple(int(p) for p in release.split(".")[:2])

    if tensorrt is None:
        return [(r, TRTEXEC[r]) for r in sorted(TRTEXEC, key=key) if key(r) >= (10, 8) and key(r)[0] == 10]
    older = [r for r in sorted(TRTEXEC, key=key) if key(r) <= key(tensorrt)]
    return [(older[-1], TRTEXEC[older[-1]])] if older else []


def unknown_trtexec_options(tensorrt: str | None, args: list[str]) -> list[str]:
    """The options in `args` (a trtexec command's) that some trtexec trtexec_tables_for(tensorrt) gives lacks."""
    found = []
    for release, names in trtexec_tables_for(tensorrt):
        found += [f"{a.partition('=')[0]} (TensorRT {release})" for a in args
                  if a.startswith("--") and a[2:].partition("=")[0] not in names]
    return found


def unknown_model_analyzer(tag: str, args: list[str], yaml_keys: list[str]) -> list[str]:
    """What `model-analyzer` of NGC `tag` refuses in `args` (after `model-analyzer`) and in the YAML's top-level
    keys: another subcommand than profile, a flag its profile lacks, a key its YamlConfigValidator does not know."""
    stand_in, keys = table_for(tag, MODEL_ANALYZER_YAML)
    _, profile = table_for(tag, MODEL_ANALYZER_PROFILE)
    found = [] if args[:1] == ["profile"] else [f"subcommand {args[:1]} (the series runs profile)"]
    found += [a for a in args[1:] if a.startswith("-") and a.partition("=")[0] not in profile]
    found += [f"{k} is not a valid yaml argument (Model Analyzer of NGC {stand_in})" for k in yaml_keys
              if k not in keys]
    return found
