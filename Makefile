# llmr top-level build.
#
# Conventions (so a new module needs no edit here):
#   common/**.c            -> build/lib/libllmr_common.a   (shared code, all PIC)
#   router/**.c            -> build/lib/libllmr_router.a   (router/main.c is the binary's main)
#   node/**.c              -> build/lib/libllmr_node.a     (node/main.c is the binary's main)
#   tools/NAME/*.c         -> build/bin/llmr-NAME
#   engines/ID/*.c,*.cu    -> build/engines/ID/libID.so + manifest.json (a .cu engine needs nvcc)
#   tests/unit/test_*.c    -> build/tests/test_*           (one Check binary each)
#   bench/NAME/*.c         -> build/bench/NAME
#   tests/gpu/NAME/*.c,*.cu-> build/tests/gpu/NAME          (needs nvcc; skips at run time without a GPU)
#   tests/plugins/ID/*.c   -> build/tests/plugins/ID/libID.so + manifest.json (test-only engine fixtures)
#   tests/fuzz/fuzz_NAME.c -> build/fuzz/fuzz_NAME          (`make fuzz`, clang libFuzzer + ASan/UBSan)
# `make test` builds everything and runs tests/run_all.sh (unit, then e2e).

BUILD     ?= build
CC        ?= cc
NVCC      ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
PKGS      := libevent libevent_pthreads jansson libcurl openssl sqlite3 libpcre2-8 check
HAVE_PKGS := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes)

CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -Wall -Wextra -Werror -fPIC -pthread -D_GNU_SOURCE -I. -Iengines/include -MMD -MP
LDLIBS    += -pthread -ldl -lm
ifeq ($(HAVE_PKGS),yes)
CFLAGS    += $(shell pkg-config --cflags $(PKGS))
LDLIBS    += $(shell pkg-config --libs $(PKGS))
endif
NVCCFLAGS ?= -O3 -g -lineinfo
NVCCFLAGS += -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra,-Werror -I. -Iengines/include \
             -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 -MMD -MP

srcs_under = $(shell find $(1) -name '*.c' 2>/dev/null | sort)
obj        = $(patsubst %.c,$(BUILD)/obj/%.o,$(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(1)))

COMMON_SRCS := $(call srcs_under,common)
ROUTER_SRCS := $(filter-out router/main.c,$(call srcs_under,router))
NODE_SRCS   := $(filter-out node/main.c,$(call srcs_under,node))
LIB_COMMON  := $(BUILD)/lib/libllmr_common.a
LIB_ROUTER  := $(BUILD)/lib/libllmr_router.a
LIB_NODE    := $(BUILD)/lib/libllmr_node.a
LIBS        := $(LIB_ROUTER) $(LIB_NODE) $(LIB_COMMON)

BINS :=
ifneq ($(wildcard router/main.c),)
BINS += $(BUILD)/bin/llmr-router
endif
ifneq ($(wildcard node/main.c),)
BINS += $(BUILD)/bin/llmr-node
endif
TOOLS := $(notdir $(patsubst %/,%,$(dir $(wildcard tools/*/*.c))))
TOOLS := $(sort $(TOOLS))
BINS  += $(foreach t,$(TOOLS),$(BUILD)/bin/llmr-$(t))

BENCHES := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard bench/*/*.c)))))
BENCH_BINS := $(foreach b,$(BENCHES),$(BUILD)/bench/$(b))

UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))

# Engines: a folder under engines/ with a manifest.json. CUDA engines build only with nvcc.
ENGINE_IDS   := $(sort $(notdir $(patsubst %/manifest.json,%,$(wildcard engines/*/manifest.json))))
cuda_engine   = $(if $(wildcard engines/$(1)/*.cu),yes,)
ENGINES_BUILT := $(foreach e,$(ENGINE_IDS),$(if $(call cuda_engine,$(e)),$(if $(NVCC),$(e),),$(e)))
ENGINE_LIBS   := $(foreach e,$(ENGINES_BUILT),$(BUILD)/engines/$(e)/lib$(e).so $(BUILD)/engines/$(e)/manifest.json)

TEST_PLUGIN_IDS := $(sort $(notdir $(patsubst %/manifest.json,%,$(wildcard tests/plugins/*/manifest.json))))
TEST_PLUGINS    := $(foreach e,$(TEST_PLUGIN_IDS),$(BUILD)/tests/plugins/$(e)/lib$(e).so $(BUILD)/tests/plugins/$(e)/manifest.json)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))

GPU_TESTS := $(if $(NVCC),$(foreach t,$(sort $(notdir $(patsubst %/,%,$(dir $(wildcard tests/gpu/*/*.c tests/gpu/*/*.cu))))),$(BUILD)/tests/gpu/$(t)),)

.PHONY: all deps check-deps test unit e2e demo clean fixtures bench help fuzz asan asan-test asan-targets tsan tsan-test
all: check-deps $(BINS) $(ENGINE_LIBS) $(TEST_PLUGINS) $(UNIT_TESTS) $(BENCH_BINS) $(GPU_TESTS)
ifeq ($(NVCC),)
	@echo "note: nvcc not found: CUDA engines and GPU tests were not built"
endif

help:
	@echo "make deps   install build/test dependencies (apt, npm fixtures)"
	@echo "make        build everything into $(BUILD)/"
	@echo "make test   install deps if missing, build, run unit and e2e tests"
	@echo "make demo   install deps if missing, build, run router+node+model and chat"

check-deps:
ifneq ($(HAVE_PKGS),yes)
	@echo "error: missing development packages (pkg-config: $(PKGS)); run 'make deps'" >&2; exit 1
endif

deps:
	@tools/deps.sh

test: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@tests/run_all.sh $(BUILD)

unit: all
	@tests/run_all.sh $(BUILD) unit

e2e: all
	@tests/run_all.sh $(BUILD) e2e

demo: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@e2e/demo.sh $(BUILD)

bench: all

# ASan+UBSan build into build-asan/ (docs/security.md): binaries, engines, test plugins, unit tests.
# Left out: CUDA parts (nvcc links without the sanitizer runtime) and benches (timings under ASan mean
# nothing). Flags travel by environment so the += lines above still apply.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
asan:
	@CFLAGS="-O1 -g $(SAN_FLAGS)" LDLIBS="$(SAN_FLAGS)" $(MAKE) --no-print-directory BUILD=build-asan CC=clang NVCC= asan-targets
asan-targets: check-deps $(BINS) $(ENGINE_LIBS) $(TEST_PLUGINS) $(UNIT_TESTS)
asan-test: asan
	@tests/run_all.sh build-asan unit

# ThreadSanitizer build into build-tsan/ (docs/security.md), the same targets as asan. tsan-test runs the
# unit and e2e tests on it with every process's reports going to build-tsan/tsan-logs/, and fails when
# any report was written (a process stopped by a test's kill would not fail on its exit code).
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
tsan:
	@CFLAGS="-O1 -g $(TSAN_FLAGS)" LDLIBS="$(TSAN_FLAGS)" $(MAKE) --no-print-directory BUILD=build-tsan CC=clang NVCC= asan-targets
tsan-test: tsan
	@rm -rf build-tsan/tsan-logs && mkdir -p build-tsan/tsan-logs
	@TSAN_OPTIONS="log_path=$(CURDIR)/build-tsan/tsan-logs/tsan halt_on_error=0 exitcode=0" tests/run_all.sh build-tsan; \
	 rc=$$?; if ls build-tsan/tsan-logs/tsan.* >/dev/null 2>&1; then \
	   echo "ThreadSanitizer reports (build-tsan/tsan-logs/):"; grep -h '^SUMMARY' build-tsan/tsan-logs/tsan.* | sort | uniq -c; exit 1; \
	 fi; exit $$rc

clean:
	rm -rf $(BUILD)

# --- libraries -------------------------------------------------------------
$(LIB_COMMON): $(call obj,$(COMMON_SRCS))
$(LIB_ROUTER): $(call obj,$(ROUTER_SRCS))
$(LIB_NODE):   $(call obj,$(NODE_SRCS))
$(LIBS):
	@mkdir -p $(dir $@)
	@rm -f $@
	$(if $^,ar rcs $@ $^,ar rcs $@)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# --- binaries --------------------------------------------------------------
$(BUILD)/bin/llmr-router: $(BUILD)/obj/router/main.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LIBS) $(LDLIBS)

$(BUILD)/bin/llmr-node: $(BUILD)/obj/node/main.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LIBS) $(LDLIBS)

define tool_rule
$(BUILD)/bin/llmr-$(1): $(call obj,$(wildcard tools/$(1)/*.c)) $(LIBS)
	@mkdir -p $$(dir $$@)
	$$(CC) -o $$@ $(call obj,$(wildcard tools/$(1)/*.c)) $(LIBS) $$(LDLIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$(t))))

define bench_rule
$(BUILD)/bench/$(1): $(call obj,$(wildcard bench/$(1)/*.c)) $(LIBS)
	@mkdir -p $$(dir $$@)
	$$(CC) -o $$@ $(call obj,$(wildcard bench/$(1)/*.c)) $(LIBS) $$(LDLIBS)
endef
$(foreach b,$(BENCHES),$(eval $(call bench_rule,$(b))))

$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LIBS) $(LDLIBS)

# --- engines ---------------------------------------------------------------
# An engine links the PIC common library statically so the .so carries what it uses.
# CUDA engines: cudart is linked statically; cuBLAS dynamically (present wherever the CUDA runtime is).
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -lcublas -lcublasLt -lrt
# nvcc rejects -pthread as a link option; -lpthread means the same to it.
NVCC_LDLIBS = $(patsubst -pthread,-lpthread,$(LDLIBS))
define engine_rule
$(BUILD)/engines/$(1)/lib$(1).so: $(call obj,$(wildcard engines/$(1)/*.c) $(wildcard engines/$(1)/*.cu)) $(LIB_COMMON)
	@mkdir -p $$(dir $$@)
	$(if $(call cuda_engine,$(1)),$$(NVCC) -shared -o $$@ $(call obj,$(wildcard engines/$(1)/*.c) $(wildcard engines/$(1)/*.cu)) $(LIB_COMMON) $(CUDA_LDLIBS) $$(NVCC_LDLIBS),$$(CC) -shared -o $$@ $(call obj,$(wildcard engines/$(1)/*.c)) $(LIB_COMMON) $$(LDLIBS))
$(BUILD)/engines/$(1)/manifest.json: engines/$(1)/manifest.json
	@mkdir -p $$(dir $$@)
	cp $$< $$@
endef
$(foreach e,$(ENGINES_BUILT),$(eval $(call engine_rule,$(e))))

# Test-only plugins (fixtures for the engine host): never installed with the real engines.
define test_plugin_rule
$(BUILD)/tests/plugins/$(1)/lib$(1).so: $(call obj,$(wildcard tests/plugins/$(1)/*.c)) $(LIB_COMMON)
	@mkdir -p $$(dir $$@)
	$$(CC) -shared -o $$@ $(call obj,$(wildcard tests/plugins/$(1)/*.c)) $(LIB_COMMON) $$(LDLIBS)
$(BUILD)/tests/plugins/$(1)/manifest.json: tests/plugins/$(1)/manifest.json
	@mkdir -p $$(dir $$@)
	cp $$< $$@
endef
$(foreach e,$(TEST_PLUGIN_IDS),$(eval $(call test_plugin_rule,$(e))))

# Fuzz targets: each tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput and is linked with the
# sources it names in a "// fuzz-sources: a.c b.c" line (compiled together with clang sanitizers).
FUZZ_CC     ?= clang
FUZZ_CFLAGS := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -I. -Iengines/include \
               $(if $(HAVE_PKGS),$(shell pkg-config --cflags $(PKGS)),)
fuzz: $(FUZZ_BINS)
$(BUILD)/fuzz/%: tests/fuzz/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $$(sed -n 's,^// fuzz-sources: *,,p' $<) $(LDLIBS)

# GPU tests: every .c/.cu in tests/gpu/NAME/ plus the common library, linked with nvcc.
define gpu_test_rule
$(BUILD)/tests/gpu/$(1): $(call obj,$(wildcard tests/gpu/$(1)/*.c) $(wildcard tests/gpu/$(1)/*.cu)) $(LIBS)
	@mkdir -p $$(dir $$@)
	$$(NVCC) -o $$@ $(call obj,$(wildcard tests/gpu/$(1)/*.c) $(wildcard tests/gpu/$(1)/*.cu)) $(LIBS) $(CUDA_LDLIBS) $$(NVCC_LDLIBS)
endef
$(foreach t,$(notdir $(GPU_TESTS)),$(eval $(call gpu_test_rule,$(t))))

.SECONDARY:

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
