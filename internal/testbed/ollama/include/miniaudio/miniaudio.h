/*
 * A stand-in for miniaudio.h, written for streamwatch's end-to-end suite.
 *
 * Ollama's module zip (github.com/ollama/ollama on the Go module proxy)
 * drops llama.cpp's vendor/ folder, and Debian 12 packages no miniaudio.
 * The only file that includes it is llama.cpp's multimodal helper
 * (tools/mtmd/mtmd-helper.cpp), which decodes audio input with six calls.
 * The test models here are text-only, so this header declares just those
 * names and makes every decode fail: audio input is reported unsupported
 * ("Unable to read WAV audio file from buffer") instead of being decoded.
 *
 * It is not miniaudio: none of its source is here, only the names the caller
 * needs, with behaviour of our own. See docs/ollama.md.
 */
#ifndef STREAMWATCH_MINIAUDIO_STANDIN_H
#define STREAMWATCH_MINIAUDIO_STANDIN_H

#include <stddef.h>
#include <stdint.h>

#ifndef MA_API
#define MA_API static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t ma_uint64;
typedef uint32_t ma_uint32;
typedef int ma_result;

#define MA_SUCCESS 0
#define MA_NOT_IMPLEMENTED (-29)

typedef enum {
    ma_format_unknown = 0,
    ma_format_f32 = 5
} ma_format;

typedef struct {
    ma_format format;
    ma_uint32 channels;
    ma_uint32 sampleRate;
} ma_decoder_config;

/* A decoder that never opens: there is nothing to hold. */
typedef struct {
    int unused;
} ma_decoder;

MA_API ma_decoder_config ma_decoder_config_init(ma_format format, ma_uint32 channels, ma_uint32 sampleRate) {
    ma_decoder_config c;
    c.format = format;
    c.channels = channels;
    c.sampleRate = sampleRate;
    return c;
}

MA_API ma_result ma_decoder_init_memory(const void *data, size_t size, const ma_decoder_config *config, ma_decoder *decoder) {
    (void)data; (void)size; (void)config;
    if (decoder != NULL) {
        decoder->unused = 0;
    }
    return MA_NOT_IMPLEMENTED;
}

MA_API ma_result ma_decoder_get_length_in_pcm_frames(ma_decoder *decoder, ma_uint64 *length) {
    (void)decoder;
    if (length != NULL) {
        *length = 0;
    }
    return MA_NOT_IMPLEMENTED;
}

MA_API ma_result ma_decoder_read_pcm_frames(ma_decoder *decoder, void *frames, ma_uint64 count, ma_uint64 *read) {
    (void)decoder; (void)frames; (void)count;
    if (read != NULL) {
        *read = 0;
    }
    return MA_NOT_IMPLEMENTED;
}

MA_API ma_result ma_decoder_uninit(ma_decoder *decoder) {
    (void)decoder;
    return MA_SUCCESS;
}

#ifdef __cplusplus
}
#endif

#endif
