package com.clawseed.probe.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Golden frames with random edits: the decoder only ever fails with a
 * WireDecodeException, and whatever decodes re-encodes to a line that
 * decodes to the same frame.
 */
class MutatedFramesTest {
    private static final byte[] ALPHABET = "{}[]\":,0123456789.eE+-tfnul\\ abxyz".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    @Test
    void mutatedGoldenFramesNeverThrowUnchecked() throws Exception {
        List<byte[]> lines = new ArrayList<>();
        for (Path f : Vectors.goldenFiles()) {
            for (byte[] l : Vectors.lines(f)) {
                if (l.length < 4000) {
                    lines.add(l);
                }
            }
        }
        Random r = new Random(0x5EED);
        int decoded = 0;
        for (int n = 0; n < 20_000; n++) {
            byte[] line = lines.get(r.nextInt(lines.size())).clone();
            int edits = 1 + r.nextInt(3);
            for (int e = 0; e < edits && line.length > 0; e++) {
                int i = r.nextInt(line.length);
                byte b = r.nextBoolean() ? ALPHABET[r.nextInt(ALPHABET.length)] : (byte) r.nextInt(256);
                switch (r.nextInt(3)) {
                    case 0:
                        line[i] = b;
                        break;
                    case 1: {
                        byte[] longer = new byte[line.length + 1];
                        System.arraycopy(line, 0, longer, 0, i);
                        longer[i] = b;
                        System.arraycopy(line, i, longer, i + 1, line.length - i);
                        line = longer;
                        break;
                    }
                    default:
                        line = java.util.Arrays.copyOf(line, i);
                        break;
                }
            }
            Frame frame;
            try {
                frame = FrameCodec.decode(line);
                if (frame instanceof Frame.Request && Ops.isKnown(((Frame.Request) frame).op)) {
                    Ops.decodeParams((Frame.Request) frame);
                }
            } catch (WireDecodeException expected) {
                continue;
            }
            decoded++;
            byte[] again = FrameCodec.encode(frame);
            Frame back = FrameCodec.decode(again);
            assertEquals(frame, back);
            assertArrayEquals(again, FrameCodec.encode(back));
        }
        // The edits must leave some frames decodable, or this tests nothing.
        assertTrue(decoded > 500, "only " + decoded + " mutated frames decoded");
    }
}
