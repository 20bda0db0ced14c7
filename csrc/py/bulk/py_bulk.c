/* Binding for the bulk insert path, one room each: Piece and its memory accounting
   (py_piece.c), HandoverQueue (py_handover_queue.c), GzipStream (py_gzip_stream.c),
   ZstdStream (py_zstd_stream.c), the
   document conventions (py_conventions.c), CommandWriter (py_command_writer.c) and the
   consumers of the queue, next_piece and pump_body (py_body_pump.c). */
#include "py_bulk.h"

#include "py_body_pump.h"
#include "py_piece.h"
#include "py_command_writer.h"
#include "py_conventions.h"
#include "py_gzip_stream.h"
#include "py_handover_queue.h"
#include "py_zstd_stream.h"

int bw_bulk_add_to_module(PyObject *module) {
    if (bw_piece_add_to_module(module) < 0 || bw_queue_add_to_module(module) < 0 ||
        bw_gzip_add_to_module(module) < 0 || bw_conventions_add_to_module(module) < 0 ||
        bw_command_writer_add_to_module(module) < 0 || bw_body_pump_add_to_module(module) < 0 ||
        bw_zstd_add_to_module(module) < 0)
        return -1;
    return 0;
}
