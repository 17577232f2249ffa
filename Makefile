# hearth - GNU Makefile.
#   make            build ./hearth (+ the CUDA backend when nvcc is found; CUDA=0 to skip)
#   make test       set up (idempotent), build, run every test tier
#   make asan       the same tests, built with ASan + UBSan (CPU only)
#   make run        set up, build, serve the default model on 127.0.0.1:8080 (ARGS="--port N ...")
#   make test-cuda  op and parity tests on an NVIDIA GPU

CC      ?= gcc
BUILD   ?= build
BIN     ?= hearth
PY      := .venv/bin/python
NVCC    ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
ifeq ($(origin CUDA),undefined)
CUDA    := $(if $(NVCC),1,0)
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation
OPT     ?= -O2 -g
CFLAGS  := $(OPT) -std=c11 $(WARN) -Iinclude -Isrc -pthread -MMD -MP -D_DEFAULT_SOURCE
LDLIBS  := -ljansson -lmicrohttpd -lpcre2-8 -lutf8proc -lm -pthread
SAN     :=

SRC     := $(shell find src -name '*.c' | sort)
CLI_SRC := $(filter src/cli/%,$(SRC))
LIB_SRC := $(filter-out src/cli/%,$(SRC))
CU_SRC  := $(shell find src -name '*.cu' | sort)
TEST_SRC := $(sort $(wildcard tests/unit/*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

ifeq ($(CUDA),1)
CFLAGS  += -DHEARTH_CUDA=1
NVARCH  := -gencode arch=compute_90,code=[sm_90,compute_90]
NVFLAGS  = -O2 -std=c++17 -Iinclude -Isrc -DHEARTH_CUDA=1 $(NVARCH) \
           -Xcompiler -Wall,-Wextra,-Werror,-Wno-unused-parameter,-Wno-format-truncation,-fPIC --Werror all-warnings
CU_OBJ  := $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,'$$ORIGIN/lib:$(CUDA_HOME)/lib64' \
           -lcublasLt -lcublas -lcudart_static -ldl -lrt -lstdc++
else
CU_OBJ  :=
endif

.PHONY: all clean test asan run setup test-cuda bench
all: $(BIN)

$(BIN): $(CLI_OBJ) $(BUILD)/libhearth.a
	$(CC) $(SAN) -o $@ $(CLI_OBJ) $(BUILD)/libhearth.a $(LDLIBS)

$(BUILD)/libhearth.a: $(LIB_OBJ) $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/test_unit: $(TEST_OBJ) $(BUILD)/libhearth.a
	$(CC) $(SAN) -o $@ $(TEST_OBJ) $(BUILD)/libhearth.a $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -c -o $@ $<

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c -o $@ $<

# wgmma and setmaxnreg exist only for the arch-specific Hopper target: this
# file's kernels are built for sm_90a alone (on other devices they have no
# image, and the op takes the sm_90 flash kernel: cu_attention_flash_wg_fits)
$(BUILD)/src/ops/cuda/attention_flash_wg.cu.o: NVARCH := -gencode arch=compute_90a,code=sm_90a

# the chat page is assembled into this object (.incbin)
$(BUILD)/src/api/web_page.o: web/index.html

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# Set-up is idempotent and cheap once done; the stamp follows its inputs.
SETUP_STAMP := .venv/.setup-done
$(SETUP_STAMP): scripts/setup.sh requirements.txt
	bash scripts/setup.sh
setup: $(SETUP_STAMP)

# the build under test runs one job per core (the CUDA objects take minutes each way)
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

test: $(SETUP_STAMP)
	$(MAKE) -j$(JOBS) all $(BUILD)/test_unit
	bash tests/run_all.sh ./$(BIN) $(BUILD)/test_unit

asan: $(SETUP_STAMP)
	$(MAKE) BUILD=build-asan BIN=hearth-asan CUDA=0 OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" all build-asan/test_unit
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  bash tests/run_all.sh ./hearth-asan build-asan/test_unit

run: $(SETUP_STAMP)
	$(MAKE) all
	./$(BIN) serve models/SmolLM2-135M-Instruct.Q4_1.gguf $(ARGS)

# Microbenchmarks: build and run bench/bench_matmul.c, bench/bench_attn_cpu.c and
# bench/bench_pick_cpu.c (they print, never fail on a time).
bench:
	$(MAKE) $(BUILD)/bench_matmul $(BUILD)/bench_attn_cpu $(BUILD)/bench_pick_cpu
	./$(BUILD)/bench_matmul
	./$(BUILD)/bench_attn_cpu
	./$(BUILD)/bench_pick_cpu

$(BUILD)/bench_matmul $(BUILD)/bench_attn_cpu $(BUILD)/bench_pick_cpu: $(BUILD)/%: bench/%.c $(BUILD)/libhearth.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $< $(BUILD)/libhearth.a $(LDLIBS)

clean:
	rm -rf build build-asan hearth hearth-asan

# CUDA op and parity tests (tests/cuda/*.c with the unit runner) and the
# CUDA benchmarks (bench/cuda/*.c and *.cu, one program each); they need CUDA=1 to
# build and an NVIDIA GPU to run.
CUDA_TEST_SRC := $(sort $(wildcard tests/cuda/*.c))
CUDA_BENCH := $(patsubst bench/cuda/%.c,$(BUILD)/bench/cuda/%,$(wildcard bench/cuda/*.c)) \
              $(patsubst bench/cuda/%.cu,$(BUILD)/bench/cuda/%,$(wildcard bench/cuda/*.cu))

$(BUILD)/test_cuda: $(CUDA_TEST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/tests/unit/runner.o $(BUILD)/libhearth.a
	$(CC) $(SAN) -o $@ $(filter %.o,$^) $(BUILD)/libhearth.a $(LDLIBS)

# bench_gemm calls cuBLAS / cuBLASLt itself
$(BUILD)/bench/cuda/bench_gemm.o: CFLAGS += -I$(CUDA_HOME)/include

$(BUILD)/bench/cuda/%: $(BUILD)/bench/cuda/%.o $(BUILD)/libhearth.a
	$(CC) -o $@ $< $(BUILD)/libhearth.a $(LDLIBS)

# a benchmark that is one .cu file of its own kernels (no libhearth; cuda_internal.cuh's device helpers)
$(BUILD)/bench/cuda/%: bench/cuda/%.cu src/ops/cuda/cuda_internal.cuh bench/cuda/copy_bw.cuh
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $< -lcudart_static

.PHONY: bench-cuda trace-cuda bench-stamps
bench-cuda: $(CUDA_BENCH)

# A measurement build: bench_model with the decode attention's step stamps
# (attention_decode.cu, HEARTH_ATTN_STAMPS) and decode_layers' (decode_layers.cu,
# HEARTH_DL_STAMPS), which it prints after the decode.
bench-stamps: $(BUILD)/stamps/bench_model_st
$(BUILD)/stamps/bench_model_st: bench/cuda/bench_model.c src/ops/cuda/attention_decode.cu src/ops/cuda/decode_layers.cu \
		$(BUILD)/libhearth.a
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -DHEARTH_ATTN_STAMPS -c -o $(BUILD)/stamps/attention_decode.cu.o src/ops/cuda/attention_decode.cu
	$(NVCC) $(NVFLAGS) -DHEARTH_DL_STAMPS -c -o $(BUILD)/stamps/decode_layers.cu.o src/ops/cuda/decode_layers.cu
	cp $(BUILD)/libhearth.a $(BUILD)/stamps/libhearth.a
	ar r $(BUILD)/stamps/libhearth.a $(BUILD)/stamps/attention_decode.cu.o $(BUILD)/stamps/decode_layers.cu.o
	$(CC) $(CFLAGS) -DHEARTH_ATTN_STAMPS -DHEARTH_DL_STAMPS -c -o $(BUILD)/stamps/bench_model.o bench/cuda/bench_model.c
	$(CC) -o $@ $(BUILD)/stamps/bench_model.o $(BUILD)/stamps/libhearth.a $(LDLIBS)

# A GPU timeline for devices without Nsight Systems (tools/prof/cupti_trace.c).
trace-cuda: $(BUILD)/libhearth_trace.so
$(BUILD)/libhearth_trace.so: tools/prof/cupti_trace.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror -fPIC -shared -I$(CUDA_HOME)/include -o $@ $< \
		-L$(CUDA_HOME)/lib -L$(CUDA_HOME)/lib64 -lcupti

test-cuda:
	@[ "$(CUDA)" = 1 ] || { echo "test-cuda: this build has no CUDA (nvcc not found or CUDA=0)"; exit 1; }
	$(MAKE) all $(BUILD)/test_cuda
	HEARTH_ROOT=$$PWD $(BUILD)/test_cuda $(FILTER)
